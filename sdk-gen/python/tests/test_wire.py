"""The Connect wire format, against exchanges recorded from a real Kiln API server."""

import base64
import json
import struct
import unittest
from datetime import datetime, timezone

import kiln
from kiln import v1
from tests.replay import Replay, load


def client(url: str) -> kiln.TrainerClient:
    return kiln.TrainerClient(url, token="t0ken", namespace="default", config_file="/nonexistent/kiln.yaml")


class MessagesTest(unittest.TestCase):
    def test_recorded_responses_round_trip(self) -> None:
        # Decoding what the server sent and encoding it again gives the same JSON: every
        # field of the generated tables maps as protobuf's JSON mapping says.
        for name, typ in (("get-complete", v1.GetTrainJobResponse), ("create-ok", v1.CreateTrainJobResponse)):
            body = json.loads(base64.b64decode(load(name)["response"]["bodyBase64"]))
            with self.subTest(name):
                self.assertEqual(typ.from_dict(body).to_dict(), body)

    def test_stream_messages_round_trip(self) -> None:
        data = base64.b64decode(load("watch-complete")["response"]["bodyBase64"])
        i, n = 0, 0
        while i < len(data):
            flags, length = struct.unpack(">BI", data[i : i + 5])
            payload = json.loads(data[i + 5 : i + 5 + length])
            i += 5 + length
            if not flags & 2:
                self.assertEqual(v1.WatchTrainJobsResponse.from_dict(payload).to_dict(), payload)
                n += 1
        self.assertGreaterEqual(n, 3)  # ADDED, SYNCED, heartbeats

    def test_json_mapping(self) -> None:
        spec = v1.TrainJobSpec(runtime="torch", nodes=2, active_deadline_seconds=28800, ttl_seconds_after_finished=0, runtime_kind=v1.RuntimeKind.RUNTIME_KIND_NAMESPACED)
        # int64 as a string, enums by name, an optional zero kept, defaults left out.
        self.assertEqual(
            spec.to_dict(),
            {"runtime": "torch", "runtimeKind": "RUNTIME_KIND_NAMESPACED", "nodes": 2, "activeDeadlineSeconds": "28800", "ttlSecondsAfterFinished": 0},
        )
        st = v1.TrainJobStatus.from_dict({"state": "STATE_FUTURE", "startTime": "2026-11-24T06:22:46.123456789+01:00", "unknownField": 1})
        self.assertEqual(st.state, v1.State.STATE_UNSPECIFIED)  # a newer server's state
        self.assertEqual(st.start_time, datetime(2026, 11, 24, 5, 22, 46, 123456, tzinfo=timezone.utc))
        with self.assertRaisesRegex(ValueError, r"TrainJobSpec.nodes: want an integer"):
            v1.TrainJobSpec.from_dict({"nodes": True})


class ClientWireTest(unittest.TestCase):
    def test_train_sends_the_request_the_server_answered(self) -> None:
        with Replay("create-ok") as srv:
            name = client(srv.url).train(
                runtime="torch-distributed",
                trainer=kiln.CustomTrainerContainer(command=["torchrun", "train.py"], num_nodes=2),
                queue="default",
                active_deadline_seconds=28800,
                ttl_seconds_after_finished=86400,
                name="wire-rec",
                request_id="wire-rec-1",
            )
        self.assertEqual(name, "wire-rec")
        got = srv.received[0]
        self.assertEqual(json.loads(got["body"]), load("create-ok")["request"]["body"])
        self.assertEqual(got["headers"]["Content-Type"], "application/json")
        self.assertEqual(got["headers"]["Connect-Protocol-Version"], "1")
        self.assertEqual(got["headers"]["Authorization"], "Bearer t0ken")

    def test_train_asks_for_a_topology_level(self) -> None:
        with Replay("create-ok") as srv:
            client(srv.url).train(runtime="torch-distributed", name="wire-rec", queue="tas", topology="rack", topology_preferred=True)
        spec = json.loads(srv.received[0]["body"])["trainJob"]["spec"]
        self.assertEqual(spec["topology"], {"level": "rack", "preferred": True})
        with self.assertRaisesRegex(ValueError, r"topology_preferred: name the level with topology="):
            client(srv.url).train(runtime="torch-distributed", topology_preferred=True)

    def test_train_retries_a_lost_answer_with_the_same_request_id(self) -> None:
        with Replay("create-ok", lose_first=True) as srv:
            name = client(srv.url).train(runtime="torch-distributed", name="wire-rec")
        self.assertEqual(name, "wire-rec")
        self.assertEqual(len(srv.received), 2)
        ids = {json.loads(r["body"])["requestId"] for r in srv.received}
        self.assertEqual(len(ids), 1)
        self.assertEqual(len(next(iter(ids))), 32)

    def test_train_warns_of_what_the_server_warned(self) -> None:
        # The server's warnings (a claim the namespace lacks, more than the queue admits) reach
        # the caller as KilnWarning, pointing at the line that called train.
        with Replay("create-ok") as srv:
            ex = srv.exchanges[0]
            body = json.loads(base64.b64decode(ex["response"]["bodyBase64"]))
            body["warnings"] = ['PersistentVolumeClaim "kiln-checkpoints" does not exist in namespace default']
            ex["response"]["bodyBase64"] = base64.b64encode(json.dumps(body).encode()).decode()
            with self.assertWarns(kiln.KilnWarning) as caught:
                name = client(srv.url).train(runtime="torch-distributed", name="wire-rec")
        self.assertEqual(name, "wire-rec")
        self.assertIn("kiln-checkpoints", str(caught.warning))
        self.assertEqual(caught.filename, __file__)

    def test_get_job(self) -> None:
        with Replay("get-complete") as srv:
            job = client(srv.url).get_job("wire-rec")
        self.assertEqual((job.name, job.status, job.reason, job.num_nodes), ("wire-rec", "Complete", "AllJobsCompleted", 2))
        self.assertEqual([s.name for s in job.steps], ["node-0", "node-1"])
        self.assertEqual({s.status for s in job.steps}, {"Succeeded"})
        self.assertEqual((job.active_deadline_seconds, job.ttl_seconds_after_finished), (28800, 86400))
        self.assertIsNotNone(job.ttl_delete_time)
        self.assertEqual(job.queue, "default")

    def test_wait_reads_the_stream(self) -> None:
        seen = []
        with Replay("watch-complete") as srv:
            job = client(srv.url).wait_for_job_status("wire-rec", callbacks=[lambda j: seen.append(j.status)])
        self.assertEqual(job.status, "Complete")
        self.assertEqual(seen, ["Complete"])
        got = srv.received[0]
        self.assertEqual(got["headers"]["Content-Type"], "application/connect+json")
        flags, length = struct.unpack(">BI", got["body"][:5])
        self.assertEqual((flags, length), (0, len(got["body"]) - 5))
        self.assertEqual(json.loads(got["body"][5:])["name"], "wire-rec")

    def test_logs(self) -> None:
        with Replay("logs") as srv:
            lines = list(client(srv.url).get_job_logs("wire-rec"))
        self.assertEqual(lines[0], "[kiln-sim] starting training")
        self.assertEqual(lines[-1], "[kiln-sim] training complete")

    def test_error_at_the_end_of_a_stream(self) -> None:
        with Replay("logs-not-found") as srv:
            with self.assertRaises(kiln.NotFoundError) as cm:
                list(client(srv.url).get_job_logs("wire-missing", step=None))
        self.assertIn('"wire-missing" not found', cm.exception.message)
        self.assertEqual(cm.exception.code, "not_found")

    def test_field_violations(self) -> None:
        with Replay("create-invalid") as srv:
            with self.assertRaises(kiln.InvalidArgumentError) as cm:
                client(srv.url).train(runtime="torch-distributed", name="x" * 70, request_id="wire-rec-2")
        e = cm.exception
        self.assertEqual([v.field for v in e.field_violations], ["train_job.name"])
        self.assertIn("must be no more than 63 characters", e.field_violations[0].description)
        self.assertIsInstance(e, ValueError)

    def test_permission_denied(self) -> None:
        with Replay("list-denied") as srv:
            with self.assertRaises(kiln.PermissionDeniedError) as cm:
                client(srv.url).list_jobs(namespace="kube-system")
        self.assertIn("may not list trainjobs", cm.exception.message)

    def test_delete(self) -> None:
        with Replay("delete-ok") as srv:
            self.assertIsNone(client(srv.url).delete_job("wire-rec"))

    def test_unreachable_server_is_unavailable_after_retries(self) -> None:
        c = kiln.TrainerClient("http://127.0.0.1:9", token="t", config_file="/nonexistent/kiln.yaml")
        c._transport.retries = 1
        with self.assertRaisesRegex(kiln.UnavailableError, r"cannot reach the Kiln API server at http://127.0.0.1:9"):
            c.list_runtimes()

    def test_a_proxy_error_without_connect_body(self) -> None:
        e = kiln.error_from_http_status(503, "Service Unavailable", b"<html>down</html>")
        self.assertIsInstance(e, kiln.UnavailableError)

    def test_bad_arguments_name_the_parameter(self) -> None:
        c = client("http://127.0.0.1:9")
        with self.assertRaisesRegex(ValueError, r"trainer.num_nodes: want a whole number of at least 1, got 0"):
            c.train(runtime="torch-distributed", trainer=kiln.CustomTrainerContainer(num_nodes=0))
        with self.assertRaisesRegex(ValueError, r"status Done: want one of Created, Queued"):
            c.wait_for_job_status("x", status="Done")
        # The Kubeflow SDK's order is runtime, initializer, trainer: a trainer second is refused, not swapped.
        with self.assertRaisesRegex(TypeError, r"the second argument is the initializer .* got a CustomTrainerContainer: pass it as trainer="):
            c.train("torch-distributed", kiln.CustomTrainerContainer(num_nodes=2))
        with self.assertRaisesRegex(TypeError, r"trainer is an Initializer: pass it as initializer="):
            c.train("torch-distributed", trainer=kiln.Initializer(dataset="hf://x/y"))
        with self.assertRaisesRegex(ValueError, r"polling_interval -1: want a positive number of seconds"):
            c.wait_for_job_status("x", {"Complete"}, 10, -1)


if __name__ == "__main__":
    unittest.main()
