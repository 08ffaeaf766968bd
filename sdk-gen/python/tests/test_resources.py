"""Resources, devices, statuses and step names in the Kubeflow SDK's words: resources_per_node as
its backend normalises them, a runtime's device and device count as it counts them, a job's
status and steps as it names them, and the calls that read them (list_jobs(status=),
get_job_logs(step=), get_runtime, get_job_events)."""

import unittest
from typing import Any, Dict, List, Tuple

import kiln
from kiln import v1
from kiln.client import _status_of
from kiln.types import normalize_resources
from tests.connectserver import Server
from tests.test_options import NOT_FOUND, TEAM, TORCH, client, runtimes, serve

MPI = {"name": "deepspeed-distributed", "kind": "RUNTIME_KIND_CLUSTER", "framework": "deepspeed", "image": "ds:1", "nodes": 2, "procsPerNode": 4, "steps": ["launcher", "node"]}


def job(name: str, state: str, *, status: str = "", jobs: Any = (), steps: Any = (), runtime: str = "torch-distributed") -> Dict[str, Any]:
    st: Dict[str, Any] = {"state": state, "jobs": list(jobs), "steps": list(steps)}
    if status:
        st["status"] = status
    return {"name": name, "namespace": "default", "createTime": "2026-11-24T10:00:00Z", "spec": {"runtime": runtime, "nodes": 2}, "status": st}


class ResourcesTest(unittest.TestCase):
    def test_normalised_as_kubeflows_backend_does(self) -> None:
        self.assertEqual(
            normalize_resources({"gpu": 1, "CPU": 2, "Memory": "4Gi", "storage": "10Gi"}),
            {"nvidia.com/gpu": 1, "cpu": 2, "memory": "4Gi", "ephemeral-storage": "10Gi"},
        )
        self.assertEqual(normalize_resources({"MIG-1g.5gb": 1, "cpu": 1}), {"cpu": 1, "nvidia.com/mig-1g.5gb": 1})
        # Extended resources keep their case; Kubernetes' own names pass as they are.
        self.assertEqual(normalize_resources({"example.com/Custom-NPU": 1, "nvidia.com/gpu": 8, "Ephemeral-Storage": "1Gi"}), {"example.com/Custom-NPU": 1, "nvidia.com/gpu": 8, "ephemeral-storage": "1Gi"})
        with self.assertRaisesRegex(ValueError, r"Multiple MIG resource types are not supported"):
            normalize_resources({"mig-1g.5gb": 1, "nvidia.com/mig-2g.10gb": 1})
        with self.assertRaisesRegex(ValueError, r"GPU \(nvidia.com/gpu\) and MIG \(nvidia.com/mig-1g.5gb\) cannot be requested together"):
            normalize_resources({"GPU": 1, "mig-1g.5gb": 1})

    def test_train_sends_them_normalised(self) -> None:
        with serve(CreateTrainJob=lambda b: (200, {"trainJob": {"name": "x"}})) as srv:
            client(srv.url).train(trainer=kiln.CustomTrainerContainer(resources_per_node={"gpu": 1, "CPU": 2, "storage": "10Gi"}))
        got = srv.bodies("CreateTrainJob")[0]["trainJob"]["spec"]["resourcesPerNode"]
        want = {"nvidia.com/gpu": "1", "cpu": "2", "ephemeral-storage": "10Gi"}
        self.assertEqual(got, {"requests": want, "limits": want})


class RuntimeDevicesTest(unittest.TestCase):
    def rt(self, **kw: Any) -> kiln.Runtime:
        return kiln.Runtime.from_proto(v1.Runtime.from_dict(dict({"name": "r", "framework": "torch", "image": "i"}, **kw)))

    def test_counted_as_kubeflow_counts_them(self) -> None:
        cases: List[Tuple[Dict[str, Any], Tuple[str, str, int]]] = [
            ({}, ("Unknown", "Unknown", 1)),
            ({"nodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8", "cpu": "16"}}}, ("gpu", "16", 2)),
            ({"resourcesPerNode": {"limits": {"google.com/tpu": "4"}}}, ("tpu", "4", 1)),
            ({"nodes": 3, "resourcesPerNode": {"limits": {"nvidia.com/mig-1g.5gb": "1"}}}, ("mig-1g.5gb", "3", 3)),
            ({"resourcesPerNode": {"limits": {"huawei.com/Ascend910": "2"}}}, ("npu", "2", 1)),
            ({"nodes": 2, "resourcesPerNode": {"limits": {"cpu": "500m"}}}, ("cpu", "500m", 2)),
            ({"nodes": 2, "resourcesPerNode": {"limits": {"memory": "1Gi"}}}, ("Unknown", "Unknown", 2)),
            # MPI's processes per node override the count, then times the nodes.
            ({"nodes": 2, "procsPerNode": 4, "resourcesPerNode": {"limits": {"cpu": "2"}}}, ("cpu", "8", 2)),
            # Only devices (an older server): those.
            ({"devicesPerNode": [{"resource": "nvidia.com/gpu", "count": 2}]}, ("gpu", "2", 1)),
        ]
        for kw, want in cases:
            with self.subTest(kw):
                t = self.rt(**kw).trainer
                assert t is not None
                self.assertEqual((t.device, t.device_count, t.num_nodes), want)

    def test_kubeflow_shape(self) -> None:
        r = kiln.Runtime.from_proto(v1.Runtime.from_dict(TEAM))
        self.assertEqual((r.name, r.kind, r.namespace, r.cluster), ("team-torch", kiln.RuntimeKind.TRAINING_RUNTIME, "default", False))
        t = r.trainer
        assert t is not None
        self.assertEqual((t.trainer_type, t.framework, t.image, t.command[:2]), (kiln.TrainerType.CUSTOM_TRAINER, "torch", "team/torch:1", ("bash", "-c")))
        self.assertIn("torchrun", t.command[2])
        tune = kiln.Runtime.from_proto(v1.Runtime.from_dict({"name": "t", "framework": "torchtune"}))
        self.assertEqual((tune.trainer.trainer_type, tune.trainer.command, tune.kind), (kiln.TrainerType.BUILTIN_TRAINER, ("tune", "run"), kiln.RuntimeKind.CLUSTER_TRAINING_RUNTIME))  # type: ignore[union-attr]
        mpi = kiln.Runtime.from_proto(v1.Runtime.from_dict(MPI))
        self.assertEqual(mpi.trainer.command[:3], ("mpirun", "--hostfile", "/etc/mpi/hostfile"))  # type: ignore[union-attr]
        # Kubeflow's constructor, and Kiln's, both make a runtime; it equals its name.
        k = kiln.Runtime("x", kiln.RuntimeTrainer(kiln.TrainerType.CUSTOM_TRAINER, "torch", "img"), kiln.RuntimeKind.TRAINING_RUNTIME)
        self.assertEqual((k.framework, k.image, k.num_nodes, k.cluster), ("torch", "img", 1, False))
        self.assertEqual(k, "x")
        self.assertEqual(kiln.Runtime(name="y", framework="jax", cluster=True).trainer.framework, "jax")  # type: ignore[union-attr]


class StatusTest(unittest.TestCase):
    def test_the_servers_word_else_the_state(self) -> None:
        self.assertEqual(_status_of(v1.TrainJobStatus.from_dict({"state": "STATE_RUNNING", "status": "Created"})), "Created")
        # An older server: a started job is Running once all its Jobs are ready or done.
        for jobs, want in (
            ([], "Created"),
            ([{"name": "node", "active": 2, "ready": 1}], "Created"),
            ([{"name": "dataset-initializer", "succeeded": 1}, {"name": "node", "active": 2, "ready": 2}], "Running"),
        ):
            with self.subTest(jobs):
                self.assertEqual(_status_of(v1.TrainJobStatus.from_dict({"state": "STATE_RUNNING", "reason": "Starting", "jobs": jobs})), want)
        for state, want in (("STATE_QUEUED", "Queued"), ("STATE_SUSPENDED", "Suspended"), ("STATE_COMPLETE", "Complete"), ("STATE_FAILED", "Failed"), ("STATE_UNSPECIFIED", "Created")):
            self.assertEqual(_status_of(v1.TrainJobStatus.from_dict({"state": state})), want)

    def test_list_jobs_by_any_status(self) -> None:
        jobs = [
            job("starting", "STATE_RUNNING", jobs=[{"name": "node", "active": 2}]),
            job("running", "STATE_RUNNING", status="Running"),
            job("queued", "STATE_QUEUED"),
            job("done", "STATE_COMPLETE"),
            job("other-runtime", "STATE_RUNNING", status="Running", runtime="team-torch"),
        ]
        with serve(ListTrainJobs=lambda b: (200, {"trainJobs": jobs}), GetRuntime=runtimes) as srv:
            c = client(srv.url)
            got = {s: [j.name for j in c.list_jobs(status=[s])] for s in ("Created", "Running", "Queued")}
            both = [j.name for j in c.list_jobs(kiln.Runtime(name="torch-distributed"), status={"Created", "Complete"})]
        self.assertEqual(got, {"Created": ["starting"], "Running": ["running", "other-runtime"], "Queued": ["queued"]})
        self.assertEqual(both, ["starting", "done"])
        sent = srv.bodies("ListTrainJobs")
        self.assertEqual(sent[0]["states"], ["STATE_RUNNING"])  # Created is a started job that is not yet running
        self.assertEqual(sent[3]["states"], ["STATE_RUNNING", "STATE_COMPLETE"])
        self.assertEqual((sent[0]["statuses"], sent[3]["statuses"]), (["Created"], ["Complete", "Created"]))
        with self.assertRaisesRegex(ValueError, r"status Done: want one of Created, Queued, Running, Suspended, Complete, Failed"):
            c.list_jobs(status=["Done"])

    def test_wait_for_created(self) -> None:
        starting = job("j", "STATE_RUNNING", jobs=[{"name": "node", "active": 2}])
        streams = [{"messages": [{"type": "WATCH_EVENT_TYPE_ADDED", "trainJob": starting}], "end": None}]
        with Server({"GetRuntime": (200, {"runtime": TORCH})}, streams=streams) as srv:
            got = client(srv.url).wait_for_job_status("j", {"Created"}, timeout=5)
        self.assertEqual((got.status, got.runtime, got.runtime.trainer.framework), ("Created", "torch-distributed", "torch"))  # type: ignore[union-attr]


class StepsTest(unittest.TestCase):
    def test_steps_in_kubeflows_words(self) -> None:
        steps = [
            {"name": "dataset-initializer-0", "replicatedJob": "dataset-initializer", "pod": "p-d", "phase": "Succeeded"},
            {"name": "model-initializer-0", "replicatedJob": "model-initializer", "pod": "p-m", "phase": "Succeeded"},
            {"name": "launcher-0", "replicatedJob": "launcher", "pod": "p-l", "phase": "Running"},
            {"name": "node-0", "replicatedJob": "node", "pod": "p-0", "phase": "Running", "devices": [{"resource": "nvidia.com/gpu", "count": "8"}]},
            {"name": "node-1", "replicatedJob": "node", "index": 1, "pod": "p-1", "phase": "Pending"},
        ]
        mpi_job = job("mpi", "STATE_RUNNING", status="Running", jobs=[{"name": "launcher", "active": 1, "ready": 1}], steps=steps, runtime="deepspeed-distributed")
        with serve(GetTrainJob=lambda b: (200, {"trainJob": mpi_job}), GetRuntime=lambda b: (200, {"runtime": MPI})) as srv:
            got = client(srv.url).get_job("mpi")
        self.assertEqual([s.name for s in got.steps], ["dataset-initializer", "model-initializer", "node-0", "node-1", "node-2"])
        self.assertEqual([s.kiln_name for s in got.steps], ["dataset-initializer-0", "model-initializer-0", "launcher-0", "node-0", "node-1"])
        self.assertEqual((got.steps[3].pod_name, got.steps[3].device, got.steps[3].device_count, got.steps[4].device_count), ("p-0", "gpu", "8", "Unknown"))
        self.assertEqual((got.runtime.name, got.runtime.trainer.framework, got.runtime.trainer.device_count), ("deepspeed-distributed", "deepspeed", "8"))  # type: ignore[union-attr]
        # Without an MPI launcher, nodes keep their numbers.
        plain = job("plain", "STATE_COMPLETE", steps=[{"name": "node-0", "replicatedJob": "node", "pod": "p", "phase": "Succeeded"}])
        self.assertEqual([s.name for s in kiln.TrainJob.from_proto(v1.TrainJob.from_dict(plain)).steps], ["node-0"])

    def test_logs_of_a_step_named_as_kubeflow_names_it(self) -> None:
        mpi_job = job("mpi", "STATE_RUNNING", jobs=[{"name": "launcher"}, {"name": "node"}])
        stream = {"messages": [{"lines": [{"step": "x", "text": "hello"}]}], "end": None}
        for step, want, gets in (("node-0", "launcher-0", 1), ("node-2", "node-1", 1), ("dataset-initializer", "dataset-initializer-0", 0), ("launcher-0", "launcher-0", 0)):
            with self.subTest(step), Server({"GetTrainJob": (200, {"trainJob": mpi_job}), "GetRuntime": (200, {"runtime": MPI})}, streams=[stream]) as srv:
                self.assertEqual(list(client(srv.url).get_job_logs("mpi", step=step)), ["hello"])
            self.assertEqual(srv.bodies("StreamLogs")[0]["step"], want)
            self.assertEqual(len(srv.bodies("GetTrainJob")), gets)
        # A plain job's node-1 is the server's node-1.
        plain = job("p", "STATE_RUNNING", jobs=[{"name": "node"}])
        with Server({"GetTrainJob": (200, {"trainJob": plain}), "GetRuntime": (200, {"runtime": TORCH})}, streams=[stream]) as srv:
            list(client(srv.url).get_job_logs("p", step="node-1"))
        self.assertEqual(srv.bodies("StreamLogs")[0]["step"], "node-1")


class RuntimeCallsTest(unittest.TestCase):
    def test_get_runtime_looks_as_kubeflow_does(self) -> None:
        with serve(GetRuntime=runtimes) as srv:
            c = client(srv.url)
            team, torch = c.get_runtime("team-torch"), c.get_runtime("torch-distributed")
            with self.assertRaises(kiln.NotFoundError):
                c.get_runtime("none")
            with self.assertRaises(kiln.NotFoundError):
                c.get_runtime("torch-distributed", namespace="default")  # Kiln's: that namespace's only
        self.assertEqual((team.kind, torch.kind), (kiln.RuntimeKind.TRAINING_RUNTIME, kiln.RuntimeKind.CLUSTER_TRAINING_RUNTIME))
        self.assertEqual(
            [(b["kind"], b.get("namespace", "")) for b in srv.bodies("GetRuntime")],
            [("RUNTIME_KIND_NAMESPACED", "default"), ("RUNTIME_KIND_NAMESPACED", "default"), ("RUNTIME_KIND_CLUSTER", ""), ("RUNTIME_KIND_NAMESPACED", "default"), ("RUNTIME_KIND_CLUSTER", ""), ("RUNTIME_KIND_NAMESPACED", "default")],
        )
        denied = (403, {"code": "permission_denied", "message": "no"})
        with serve(GetRuntime=lambda b: denied if b.get("kind") == "RUNTIME_KIND_NAMESPACED" else (200, {"runtime": TORCH})) as srv:
            self.assertEqual(client(srv.url).get_runtime("torch-distributed").name, "torch-distributed")

    def test_list_runtimes_prefers_the_namespaces(self) -> None:
        shadow = dict(TEAM, name="torch-distributed")
        with serve(ListRuntimes=lambda b: (200, {"runtimes": [TORCH, dict(TORCH, name="jax")] + [shadow, TEAM]})) as srv:
            got = [(r.name, r.kind.value) for r in client(srv.url).list_runtimes()]  # type: ignore[union-attr]
        self.assertEqual(got, [("torch-distributed", "TrainingRuntime"), ("team-torch", "TrainingRuntime"), ("jax", "ClusterTrainingRuntime")])

    def test_events_with_kubeflows_fields(self) -> None:
        ev = {"type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes", "object": "Pod/mnist-node-0-0-x", "count": 3, "firstTime": "2026-11-24T10:00:00Z", "lastTime": "2026-11-24T10:05:00Z", "source": "scheduler"}
        with serve(ListEvents=lambda b: (200, {"events": [ev]})) as srv:
            (e,) = client(srv.url).get_job_events("mnist")
        self.assertEqual((e.involved_object_kind, e.involved_object_name, e.reason, e.message, e.event_time.minute), ("Pod", "mnist-node-0-0-x", "FailedScheduling", "0/3 nodes", 0))  # type: ignore[union-attr]
        self.assertEqual((e.type, e.object, e.count, e.last_time.minute, e.source), ("Warning", "Pod/mnist-node-0-0-x", 3, 5, "scheduler"))  # type: ignore[union-attr]

    def test_a_jobs_runtime_it_cannot_read_is_still_named(self) -> None:
        done = job("j", "STATE_COMPLETE")
        with serve(GetTrainJob=lambda b: (200, {"trainJob": done}), GetRuntime=lambda b: NOT_FOUND) as srv:
            got = client(srv.url).get_job("j")
        self.assertEqual((got.runtime.name, got.runtime.trainer.framework, got.runtime == "torch-distributed"), ("torch-distributed", "Unknown", True))  # type: ignore[union-attr]


if __name__ == "__main__":
    unittest.main()
