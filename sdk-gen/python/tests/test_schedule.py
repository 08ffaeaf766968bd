"""Schedules (CronTrainJobService) on the wire: what the client sends, and what it makes of
the server's answers, against a local Connect server that answers as the API server does."""

import unittest
from datetime import datetime, timezone
from typing import Any, Dict, List

import kiln
from kiln import v1
from tests.connectserver import Server

SERVICE = "/kiln.v1.CronTrainJobService/"

# A CronTrainJob as the API server answers it: a weekly retrain, Sundays at 02:00 in Berlin,
# with a run active and the next one due on Sunday 2026-11-29 at 02:00 CET (01:00 UTC).
WEEKLY: Dict[str, Any] = {
    "name": "weekly-retrain",
    "namespace": "default",
    "uid": "0b7e4c1e-5d0a-4f7e-9a53-3c1f6f1f2a10",
    "resourceVersion": "4711",
    "createTime": "2026-11-20T09:30:00Z",
    "labels": {"team": "nlp"},
    "spec": {
        "schedule": "0 2 * * 0",
        "timeZone": "Europe/Berlin",
        "concurrencyPolicy": "CONCURRENCY_POLICY_FORBID",
        "startingDeadlineSeconds": "3600",
        "successfulJobsHistoryLimit": 2,
        "failedJobsHistoryLimit": 0,
        "trainJob": {
            "labels": {"kueue.x-k8s.io/queue-name": "default"},
            "spec": {
                "runtime": "torch-distributed",
                "image": "ghcr.io/kiln-ml/retrain:1.4",
                "command": ["torchrun", "retrain.py"],
                "nodes": 4,
                "queue": "default",
                "activeDeadlineSeconds": "43200",
            },
        },
    },
    "status": {
        "active": ["weekly-retrain-29921820"],
        "lastScheduleTime": "2026-11-22T01:00:00Z",
        "lastSuccessfulTime": "2026-11-15T09:12:31.250Z",
        "nextScheduleTime": "2026-11-29T02:00:00+01:00",
    },
}

# Two runs of it, newest first, as ListCronTrainJobRuns orders them.
RUNS: List[Dict[str, Any]] = [
    {
        "name": "weekly-retrain-m4k2p",
        "namespace": "default",
        "createTime": "2026-11-24T10:41:07Z",
        "labels": {"kiln.dev/cron-train-job": "weekly-retrain"},
        "spec": {"runtime": "torch-distributed", "nodes": 4, "queue": "default"},
        "status": {"state": "STATE_QUEUED", "reason": "Pending", "activeDeadlineSeconds": "43200", "queue": {"localQueue": "default", "positionInLocalQueue": 2}},
    },
    {
        "name": "weekly-retrain-29921820",
        "namespace": "default",
        "createTime": "2026-11-22T01:00:02Z",
        "labels": {"kiln.dev/cron-train-job": "weekly-retrain"},
        "spec": {"runtime": "torch-distributed", "nodes": 4, "queue": "default"},
        "status": {"state": "STATE_COMPLETE", "reason": "AllJobsCompleted", "startTime": "2026-11-22T01:00:05Z", "completionTime": "2026-11-22T09:12:31Z",
                   "restarts": {"count": 2, "countedTowardsMax": 1, "maxRestarts": 3, "lastReason": "Disruption"}},
    },
]

NOT_FOUND = (404, {"code": "not_found", "message": 'CronTrainJob "weekly-retrain" not found in namespace default'})


def client(url: str) -> kiln.TrainerClient:
    return kiln.TrainerClient(url, token="t0ken", namespace="default", config_file="/nonexistent/kiln.yaml")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


class ScheduleFromProtoTest(unittest.TestCase):
    def test_decodes_the_servers_answer(self) -> None:
        s = kiln.Schedule.from_proto(v1.CronTrainJob.from_dict(WEEKLY))
        self.assertEqual((s.name, s.namespace, s.schedule, s.time_zone, s.concurrency_policy, s.suspend), ("weekly-retrain", "default", "0 2 * * 0", "Europe/Berlin", "Forbid", False))
        # int64 from a JSON string, int32 as a number; a limit of 0 is kept, not taken as unset.
        self.assertEqual((s.starting_deadline_seconds, s.successful_jobs_history_limit, s.failed_jobs_history_limit), (3600, 2, 0))
        self.assertEqual((s.runtime, s.image, s.num_nodes, s.queue, s.active_deadline_seconds), ("torch-distributed", "ghcr.io/kiln-ml/retrain:1.4", 4, "default", 43200))
        self.assertEqual(s.active, ["weekly-retrain-29921820"])
        self.assertEqual(s.last_schedule_time, utc(2026, 11, 22, 1, 0))
        self.assertEqual(s.last_successful_time, datetime(2026, 11, 15, 9, 12, 31, 250000, tzinfo=timezone.utc))
        self.assertEqual(s.next_schedule_time, utc(2026, 11, 29, 1, 0))  # 02:00+01:00, in UTC
        self.assertEqual(s.next_schedule_time.weekday(), 6)
        self.assertEqual(s.creation_timestamp, utc(2026, 11, 20, 9, 30))
        self.assertEqual(s.labels, {"team": "nlp"})
        self.assertIsInstance(s.raw, v1.CronTrainJob)
        self.assertEqual(s.raw.uid, WEEKLY["uid"])

    def test_unset_fields(self) -> None:
        # Suspended, never run, no limits set: None, not 0; an unset policy is Allow.
        s = kiln.Schedule.from_proto(v1.CronTrainJob.from_dict({"name": "nightly", "spec": {"schedule": "@daily", "suspend": True}}))
        self.assertEqual((s.concurrency_policy, s.suspend, s.time_zone, s.runtime, s.num_nodes), ("Allow", True, "", "", 0))
        for f in ("starting_deadline_seconds", "successful_jobs_history_limit", "failed_jobs_history_limit", "active_deadline_seconds"):
            self.assertIsNone(getattr(s, f), f)
        for f in ("last_schedule_time", "last_successful_time", "next_schedule_time", "creation_timestamp"):
            self.assertIsNone(getattr(s, f), f)
        self.assertEqual((s.active, s.labels), ([], {}))
        self.assertEqual(kiln.Schedule.from_proto(v1.CronTrainJob()).name, "")

    def test_policies(self) -> None:
        for wire, want in (("CONCURRENCY_POLICY_ALLOW", "Allow"), ("CONCURRENCY_POLICY_FORBID", "Forbid"), ("CONCURRENCY_POLICY_REPLACE", "Replace"), ("CONCURRENCY_POLICY_FUTURE", "Allow")):
            with self.subTest(wire):
                self.assertEqual(kiln.Schedule.from_proto(v1.CronTrainJob.from_dict({"spec": {"concurrencyPolicy": wire}})).concurrency_policy, want)


class ScheduleWireTest(unittest.TestCase):
    def test_create_schedule_sends_the_schedule_and_its_run(self) -> None:
        with Server({"CreateCronTrainJob": (200, {"cronTrainJob": WEEKLY})}) as srv:
            s = client(srv.url).create_schedule(
                "weekly-retrain",
                "0 2 * * 0",
                "torch-distributed",
                kiln.CustomTrainerContainer(image="ghcr.io/kiln-ml/retrain:1.4", command=["torchrun", "retrain.py"], num_nodes=4, resources_per_node={"nvidia.com/gpu": 8}, env={"EPOCHS": "3"}),
                kiln.Initializer(dataset="hf://tatsu-lab/alpaca"),
                time_zone="Europe/Berlin",
                concurrency_policy="Forbid",
                starting_deadline_seconds=3600,
                successful_jobs_history_limit=2,
                failed_jobs_history_limit=0,
                queue="default",
                priority_class="low",
                active_deadline_seconds=12 * 3600,
                ttl_seconds_after_finished=7 * 86400,
                labels={"team": "nlp"},
                annotations={"owner": "ana"},
                run_labels={"kind": "retrain"},
                request_id="sched-1",
            )
        self.assertEqual(s.name, "weekly-retrain")
        self.assertEqual(s.next_schedule_time, utc(2026, 11, 29, 1, 0))
        self.assertEqual(len(srv.received), 1)
        got = srv.received[0]
        self.assertEqual(got["path"], SERVICE + "CreateCronTrainJob")
        self.assertEqual(got["headers"]["Content-Type"], "application/json")
        self.assertEqual(got["headers"]["Authorization"], "Bearer t0ken")
        self.assertEqual(
            got["body"],
            {
                "namespace": "default",
                "cronTrainJob": {
                    "name": "weekly-retrain",
                    "labels": {"team": "nlp"},
                    "annotations": {"owner": "ana"},
                    "spec": {
                        "schedule": "0 2 * * 0",
                        "timeZone": "Europe/Berlin",
                        "concurrencyPolicy": "CONCURRENCY_POLICY_FORBID",
                        "startingDeadlineSeconds": "3600",
                        "successfulJobsHistoryLimit": 2,
                        "failedJobsHistoryLimit": 0,
                        "trainJob": {
                            "labels": {"kind": "retrain"},
                            "spec": {
                                "runtime": "torch-distributed",
                                "image": "ghcr.io/kiln-ml/retrain:1.4",
                                "command": ["torchrun", "retrain.py"],
                                "env": [{"name": "EPOCHS", "value": "3"}],
                                "nodes": 4,
                                "resourcesPerNode": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}},
                                "datasetUri": "hf://tatsu-lab/alpaca",
                                "queue": "default",
                                "priorityClass": "low",
                                "activeDeadlineSeconds": "43200",
                                "ttlSecondsAfterFinished": 604800,
                            },
                        },
                    },
                },
                "requestId": "sched-1",
            },
        )

    def test_create_schedule_builds_each_run_as_train_builds_a_job(self) -> None:
        args: Dict[str, Any] = dict(
            trainer=kiln.CustomTrainerContainer(command=["python", "-m", "retrain"], args=["--epochs", "3"], num_nodes=2, num_procs_per_node=4, resources_per_node={"cpu": 4, "memory": "16Gi"}),
            initializer=kiln.Initializer(dataset="hf://d", model="hf://m"),
            queue="q",
            active_deadline_seconds=60,
            ttl_seconds_after_finished=0,
        )
        runtime = kiln.Runtime(name="team-runtime", namespace="default", framework="torch", image="", num_nodes=1, cluster=False, deprecated=False, steps=[])
        answers = {"CreateCronTrainJob": (200, {"cronTrainJob": WEEKLY}), "CreateTrainJob": (200, {"trainJob": {"name": "team-runtime-x"}})}
        with Server(answers) as srv:
            c = client(srv.url)
            c.create_schedule("s", "@daily", runtime, **args)
            c.train(runtime, **args)
        sched = srv.bodies("CreateCronTrainJob")[0]["cronTrainJob"]["spec"]["trainJob"]["spec"]
        self.assertEqual(srv.received[1]["path"], "/kiln.v1.TrainJobService/CreateTrainJob")
        job = srv.received[1]["body"]["trainJob"]["spec"]
        self.assertEqual(sched, job)
        self.assertEqual(sched["runtimeKind"], "RUNTIME_KIND_NAMESPACED")
        self.assertEqual(sched["ttlSecondsAfterFinished"], 0)

    def test_create_schedule_defaults(self) -> None:
        # Allow by default, sent as such; the schedule's suspend is the schedule's, not its runs'.
        with Server({"CreateCronTrainJob": (200, {"cronTrainJob": WEEKLY})}) as srv:
            client(srv.url).create_schedule("s", "@hourly", "torch-distributed", suspend=True, namespace="team-a")
        body = srv.received[0]["body"]
        self.assertEqual(body["namespace"], "team-a")
        self.assertEqual(body["cronTrainJob"], {"name": "s", "spec": {"schedule": "@hourly", "concurrencyPolicy": "CONCURRENCY_POLICY_ALLOW", "suspend": True, "trainJob": {"spec": {"runtime": "torch-distributed"}}}})
        self.assertRegex(body["requestId"], r"^[0-9a-f]{32}$")

    def test_concurrency_policy_in_any_case(self) -> None:
        with Server({"CreateCronTrainJob": (200, {"cronTrainJob": WEEKLY})}) as srv:
            c = client(srv.url)
            for p in ("replace", "FORBID", "allow"):
                c.create_schedule("s", "@daily", "torch-distributed", concurrency_policy=p)
        self.assertEqual(
            [b["cronTrainJob"]["spec"]["concurrencyPolicy"] for b in srv.bodies("CreateCronTrainJob")],
            ["CONCURRENCY_POLICY_REPLACE", "CONCURRENCY_POLICY_FORBID", "CONCURRENCY_POLICY_ALLOW"],
        )

    def test_bad_arguments_raise_before_any_request(self) -> None:
        with Server({"CreateCronTrainJob": (200, {"cronTrainJob": WEEKLY})}) as srv:
            c = client(srv.url)
            for bad in ("Sometimes", "", None, 2):
                with self.subTest(bad):
                    with self.assertRaisesRegex(ValueError, r"^concurrency_policy .*: want one of Allow, Forbid, Replace"):
                        c.create_schedule("s", "@daily", "torch-distributed", concurrency_policy=bad)  # type: ignore[arg-type]
            with self.assertRaisesRegex(ValueError, r"concurrency_policy 'Sometimes'"):
                c.create_schedule("s", "@daily", "torch-distributed", concurrency_policy="Sometimes")
            with self.assertRaisesRegex(ValueError, r"runtime: name the runtime"):
                c.create_schedule("s", "@daily", None)
            with self.assertRaisesRegex(ValueError, r"trainer.num_nodes: want a whole number of at least 1, got 0"):
                c.create_schedule("s", "@daily", "torch-distributed", kiln.CustomTrainerContainer(num_nodes=0))
        self.assertEqual(srv.received, [])

    def test_create_schedule_retries_a_lost_answer_with_the_same_request_id(self) -> None:
        with Server({"CreateCronTrainJob": (200, {"cronTrainJob": WEEKLY})}, lose_first=True) as srv:
            s = client(srv.url).create_schedule("weekly-retrain", "0 2 * * 0", "torch-distributed")
        self.assertEqual(s.name, "weekly-retrain")
        ids = [b["requestId"] for b in srv.bodies("CreateCronTrainJob")]
        self.assertEqual(len(ids), 2)
        self.assertEqual(ids[0], ids[1])
        self.assertRegex(ids[0], r"^[0-9a-f]{32}$")

    def test_trigger_schedule_returns_the_run(self) -> None:
        answer = (200, {"trainJob": RUNS[0], "replayed": False})
        with Server({"TriggerCronTrainJob": answer}) as srv:
            c = client(srv.url)
            self.assertEqual(c.trigger_schedule("weekly-retrain"), "weekly-retrain-m4k2p")
            self.assertEqual(c.trigger_schedule("weekly-retrain", "team-a", request_id="trig-1"), "weekly-retrain-m4k2p")
        first, second = srv.bodies("TriggerCronTrainJob")
        self.assertEqual(set(first), {"namespace", "name", "requestId"})
        self.assertEqual((first["namespace"], first["name"]), ("default", "weekly-retrain"))
        self.assertRegex(first["requestId"], r"^[0-9a-f]{32}$")
        self.assertEqual(second, {"namespace": "team-a", "name": "weekly-retrain", "requestId": "trig-1"})

    def test_trigger_schedule_retries_a_lost_answer_with_the_same_request_id(self) -> None:
        with Server({"TriggerCronTrainJob": (200, {"trainJob": RUNS[0], "replayed": True})}, lose_first=True) as srv:
            self.assertEqual(client(srv.url).trigger_schedule("weekly-retrain"), "weekly-retrain-m4k2p")
        ids = [b["requestId"] for b in srv.bodies("TriggerCronTrainJob")]
        self.assertEqual(len(ids), 2)
        self.assertEqual(ids[0], ids[1])

    def test_list_schedule_runs(self) -> None:
        with Server({"ListCronTrainJobRuns": (200, {"trainJobs": RUNS})}) as srv:
            runs = client(srv.url).list_schedule_runs("weekly-retrain")
        self.assertEqual(srv.received[0]["body"], {"namespace": "default", "name": "weekly-retrain"})
        self.assertTrue(all(isinstance(r, kiln.TrainJob) for r in runs))
        # The server's order, newest first, kept.
        self.assertEqual([(r.name, r.status, r.reason) for r in runs], [("weekly-retrain-m4k2p", "Queued", "Pending"), ("weekly-retrain-29921820", "Complete", "AllJobsCompleted")])
        queued, done = runs
        self.assertEqual((queued.queue, queued.queue_position, queued.active_deadline_seconds, queued.num_nodes), ("default", 2, 43200, 4))
        self.assertEqual((done.start_time, done.completion_time), (utc(2026, 11, 22, 1, 0, 5), utc(2026, 11, 22, 9, 12, 31)))
        self.assertEqual(done.labels, {"kiln.dev/cron-train-job": "weekly-retrain"})
        self.assertEqual(done.creation_timestamp, utc(2026, 11, 22, 1, 0, 2))
        self.assertEqual([(r.restarts, r.restarts_counted) for r in runs], [(0, 0), (2, 1)])

    def test_list_get_suspend_resume_delete(self) -> None:
        suspended = dict(WEEKLY, spec=dict(WEEKLY["spec"], suspend=True), status={"active": []})
        answers = {
            "ListCronTrainJobs": (200, {"cronTrainJobs": [WEEKLY, {"name": "nightly", "namespace": "team-b", "spec": {"schedule": "@daily"}}]}),
            "GetCronTrainJob": (200, {"cronTrainJob": WEEKLY}),
            "SuspendCronTrainJob": (200, {"cronTrainJob": suspended}),
            "ResumeCronTrainJob": (200, {"cronTrainJob": WEEKLY}),
            "DeleteCronTrainJob": (200, {}),
        }
        with Server(answers) as srv:
            c = client(srv.url)
            listed = c.list_schedules(all_namespaces=True, label_selector="team=nlp")
            got = c.get_schedule("weekly-retrain")
            paused = c.suspend_schedule("weekly-retrain")
            resumed = c.resume_schedule("weekly-retrain", "team-a")
            self.assertIsNone(c.delete_schedule("weekly-retrain", keep_runs=True))
        self.assertEqual([(s.namespace, s.name) for s in listed], [("default", "weekly-retrain"), ("team-b", "nightly")])
        self.assertEqual(got.next_schedule_time, utc(2026, 11, 29, 1, 0))
        self.assertEqual((paused.suspend, paused.next_schedule_time, paused.active), (True, None, []))
        self.assertEqual((resumed.suspend, resumed.next_schedule_time), (False, utc(2026, 11, 29, 1, 0)))
        self.assertEqual(
            [(r["path"][len(SERVICE) :], r["body"]) for r in srv.received],
            [
                ("ListCronTrainJobs", {"namespace": "default", "allNamespaces": True, "labelSelector": "team=nlp"}),
                ("GetCronTrainJob", {"namespace": "default", "name": "weekly-retrain"}),
                ("SuspendCronTrainJob", {"namespace": "default", "name": "weekly-retrain"}),
                ("ResumeCronTrainJob", {"namespace": "team-a", "name": "weekly-retrain"}),
                ("DeleteCronTrainJob", {"namespace": "default", "name": "weekly-retrain", "keepRuns": True}),
            ],
        )

    def test_get_schedule_not_found(self) -> None:
        with Server({"GetCronTrainJob": NOT_FOUND, "DeleteCronTrainJob": NOT_FOUND}) as srv:
            c = client(srv.url)
            with self.assertRaises(kiln.NotFoundError) as cm:
                c.get_schedule("weekly-retrain")
            with self.assertRaises(kiln.NotFoundError):
                c.delete_schedule("weekly-retrain")
        self.assertIn('"weekly-retrain" not found', cm.exception.message)
        self.assertEqual(srv.bodies("DeleteCronTrainJob"), [{"namespace": "default", "name": "weekly-retrain"}])


if __name__ == "__main__":
    unittest.main()


class TraceContextTest(unittest.TestCase):
    """The W3C trace context a caller runs in reaches the API server (TRACEPARENT, as
    OpenTelemetry's environment carriers), so the job's trace starts in the caller's."""

    TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    def test_sends_traceparent_from_the_environment(self) -> None:
        import os
        from unittest import mock

        with Server({"GetCronTrainJob": (200, {"cronTrainJob": WEEKLY})}) as srv:
            with mock.patch.dict(os.environ, {"TRACEPARENT": self.TRACEPARENT, "TRACESTATE": "kiln=1"}):
                client(srv.url).get_schedule("weekly-retrain")
            with mock.patch.dict(os.environ, {}, clear=False):
                os.environ.pop("TRACEPARENT", None)
                client(srv.url).get_schedule("weekly-retrain")
        first, second = (r["headers"] for r in srv.received)
        self.assertEqual((first.get("traceparent"), first.get("tracestate")), (self.TRACEPARENT, "kiln=1"))
        self.assertNotIn("traceparent", second)


class ConvertTest(unittest.TestCase):
    """convert_manifests sends the sources as they are, with the options, and returns the
    results and warnings."""

    def test_convert(self) -> None:
        answer = {
            "manifests": [{"kind": "TrainJob", "name": "mnist", "source": "PyTorchJob/mnist", "manifest": "kind: TrainJob\n"}],
            "warnings": [{"source": "PyTorchJob/mnist", "field": "spec.runPolicy.backoffLimit", "message": "not carried over"},
                         {"document": 0, "source": "PyTorchJob/mnist", "field": "spec.x", "message": "changed", "note": True}],
        }
        with Server({"ConvertManifests": (200, answer)}) as srv:
            res = client(srv.url).convert_manifests("kind: PyTorchJob\n", runtime="torch-distributed-spot", namespace="team-b")
        self.assertEqual(srv.bodies("ConvertManifests"), [{"manifests": "kind: PyTorchJob\n", "runtime": "torch-distributed-spot", "namespace": "team-b"}])
        self.assertEqual([(m.kind, m.name, m.source) for m in res.manifests], [("TrainJob", "mnist", "PyTorchJob/mnist")])
        self.assertEqual([(w.field, w.note) for w in res.warnings], [("spec.runPolicy.backoffLimit", False), ("spec.x", True)])
