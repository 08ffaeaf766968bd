"""kiln.options and train() as the Kubeflow SDK's: what each option writes into the TrainJob, what
is refused (naming the option), when the client sends a whole TrainJob manifest instead of a
NewTrainJob, CustomTrainer and the backend configurations."""

import json
import unittest
import unittest.mock
import warnings
from typing import Any, Callable, Dict, List, Tuple

import kiln
from kiln import options as o
from tests.connectserver import Server

CREATED = (200, {"trainJob": {"name": "mnist"}})
TORCH = {"name": "torch-distributed", "kind": "RUNTIME_KIND_CLUSTER", "framework": "torch", "image": "pytorch/pytorch:2.7", "nodes": 1, "steps": ["node"]}
TEAM = {"name": "team-torch", "namespace": "default", "kind": "RUNTIME_KIND_NAMESPACED", "framework": "torch", "image": "team/torch:1", "steps": ["node"]}
TUNE = {"name": "torchtune-llama", "kind": "RUNTIME_KIND_CLUSTER", "framework": "torchtune", "image": "tune:1", "steps": ["node"]}
NOT_FOUND = (404, {"code": "not_found", "message": "not found"})


class Answers(dict):
    """Answers that depend on the request: a method maps to a function of its body."""

    def __init__(self, srv_box: List[Server], **by_method: Callable[[Dict[str, Any]], Tuple[int, Dict[str, Any]]]) -> None:
        super().__init__()
        self.box, self.by_method = srv_box, by_method

    def __bool__(self) -> bool:
        return True  # the server reads "answers or {}"

    def get(self, method: str, default: Any = None) -> Any:  # type: ignore[override]
        if method not in self.by_method:
            return default
        return self.by_method[method](self.box[0].received[-1]["body"])


def runtimes(body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """GetRuntime as the API server answers it, for the runtimes above."""
    for r in (TORCH, TEAM, TUNE):
        namespaced = body.get("kind") == "RUNTIME_KIND_NAMESPACED"
        if r["name"] == body.get("name") and namespaced == (r["kind"] == "RUNTIME_KIND_NAMESPACED"):
            return 200, {"runtime": r}
    return NOT_FOUND


def serve(**by_method: Callable[[Dict[str, Any]], Tuple[int, Dict[str, Any]]]) -> Server:
    box: List[Server] = []
    srv = Server(Answers(box, **by_method))
    box.append(srv)
    return srv


def client(url: str) -> kiln.TrainerClient:
    return kiln.TrainerClient(url, token="t0ken", namespace="default", config_file="/nonexistent/kiln.yaml")


def train(trainer: Any = None, opts: Any = None, **kw: Any) -> Dict[str, Any]:
    """Submits with the options and returns the CreateTrainJob request the server got."""
    with serve(CreateTrainJob=lambda b: CREATED, GetRuntime=runtimes) as srv:
        client(srv.url).train(trainer=trainer, options=opts, **kw)
    return srv.bodies("CreateTrainJob")[0]


def train_func() -> None:
    print("training")


class OptionsTest(unittest.TestCase):
    def test_every_option_writes_its_part_as_kubeflows_do(self) -> None:
        backend = client("http://127.0.0.1:9")
        job: Dict[str, Any] = {}
        container = kiln.CustomTrainerContainer(image="img")
        for opt in (
            o.Name("mnist"),
            o.Labels({"team": "nlp"}),
            o.Annotations({"a": "b"}),
            o.TrainerCommand(["python", "t.py"]),
            o.TrainerArgs(["--epochs", "3"]),
            o.TrainerEnvFrom.secret("AWS_KEY", secret_name="s3", key="id"),
            o.TrainerEnvFrom.config_map("MODE", config_map_name="cfg", key="mode"),
            o.ActiveDeadlineSeconds(3600),
        ):
            opt(job, container, backend)
        self.assertEqual(
            job,
            {
                "metadata": {"name": "mnist", "labels": {"team": "nlp"}, "annotations": {"a": "b"}},
                "spec": {
                    "trainer": {
                        "command": ["python", "t.py"],
                        "args": ["--epochs", "3"],
                        "env": [
                            {"name": "AWS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "id"}}},
                            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
                        ],
                    },
                    "activeDeadlineSeconds": 3600,
                },
            },
        )

    def test_runtime_patch_as_the_api_spells_it(self) -> None:
        patch = o.RuntimePatch(
            training_runtime_spec=o.TrainingRuntimeSpecPatch(
                template=o.JobSetTemplatePatch(
                    metadata={"labels": {"x": "y"}},
                    spec=o.JobSetSpecPatch(
                        replicated_jobs=[
                            o.ReplicatedJobPatch(
                                name="node",
                                template=o.JobTemplatePatch(
                                    spec=o.JobSpecPatch(
                                        template=o.PodTemplatePatch(
                                            spec=o.PodSpecPatch(
                                                service_account_name="trainer",
                                                node_selector={"disk": "ssd"},
                                                tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                                                volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "mnist"}}],
                                                containers=[o.ContainerPatch(name="node", volume_mounts=[{"name": "data", "mountPath": "/mnt/data"}])],
                                                init_containers=[],
                                            )
                                        )
                                    )
                                ),
                            )
                        ]
                    ),
                )
            )
        )
        job: Dict[str, Any] = {}
        patch(job, None, client("http://127.0.0.1:9"))
        self.assertEqual(
            job["spec"]["runtimePatches"],
            [
                {
                    "trainingRuntimeSpec": {
                        "template": {
                            "metadata": {"labels": {"x": "y"}},
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {
                                                "template": {
                                                    "spec": {
                                                        "serviceAccountName": "trainer",
                                                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "mnist"}}],
                                                        "containers": [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/mnt/data"}]}],
                                                        "nodeSelector": {"disk": "ssd"},
                                                        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                                                    }
                                                }
                                            }
                                        },
                                    }
                                ]
                            },
                        }
                    },
                    "manager": "trainer.kubeflow.org/kubeflow-sdk",
                }
            ],
        )

    def test_refusals_name_the_option(self) -> None:
        local = type("LocalProcessBackend", (), {"_backend_kind": "localprocess"})()
        for opt in (o.Labels({}), o.Annotations({}), o.TrainerCommand([]), o.TrainerArgs([]), o.RuntimePatch(), o.TrainerEnvFrom("A", {"secretKeyRef": {}}), o.ActiveDeadlineSeconds(1)):
            name = type(opt).__name__
            with self.subTest(name), self.assertRaisesRegex(ValueError, rf"^{name} option is not compatible with LocalProcessBackend. Supported backends: KubernetesBackend"):
                opt({}, None, local)
        o.Name("x")({}, None, local)  # every backend
        k8s = client("http://127.0.0.1:9")
        func = kiln.CustomTrainer(func=train_func)
        with self.assertRaisesRegex(ValueError, r"TrainerCommand can only be used with CustomTrainerContainer"):
            o.TrainerCommand(["x"])({}, func, k8s)
        with self.assertRaisesRegex(ValueError, r"TrainerArgs can only be used with CustomTrainerContainer"):
            o.TrainerArgs(["x"])({}, func, k8s)
        builtin = kiln.BuiltinTrainer(config=kiln.TorchTuneConfig())
        with self.assertRaisesRegex(ValueError, r"TrainerEnvFrom option is not compatible with BuiltinTrainer"):
            o.TrainerEnvFrom("A", {"secretKeyRef": {"name": "s", "key": "k"}})({}, builtin, k8s)

    def test_validation(self) -> None:
        for bad, want in (
            (lambda: o.ContainerPatch(name=" "), "Container name must be a non-empty string"),
            (lambda: o.ContainerPatch(name="node", env=[{"name": "A"}]), "either 'value' or 'valueFrom'"),
            (lambda: o.ContainerPatch(name="node", env=[{"name": "A", "valueFrom": {"x": 1}}]), "must contain one of"),
            (lambda: o.ContainerPatch(name="node", volume_mounts=[{"name": "d", "mountPath": "rel"}]), "must be an absolute path"),
            (lambda: o.TrainerEnvFrom("", {}), "env_name must be a non-empty string"),
            (lambda: o.ActiveDeadlineSeconds(0), "positive integer"),
            (lambda: o.ActiveDeadlineSeconds(True), "positive integer"),  # type: ignore[arg-type]
        ):
            with self.subTest(want), self.assertRaisesRegex(ValueError, want):
                bad()


class TrainWireTest(unittest.TestCase):
    def test_options_a_new_train_job_says_stay_a_new_train_job(self) -> None:
        body = train(
            kiln.CustomTrainerContainer(image="ghcr.io/me/train:1", num_nodes=2),
            [o.Name("mnist"), o.Labels({"team": "nlp"}), o.Annotations({"a": "b"}), o.TrainerCommand(["python", "t.py"]), o.TrainerArgs(["-v"]), o.ActiveDeadlineSeconds(60)],
            labels={"extra": "1"},
        )
        self.assertEqual(
            body["trainJob"],
            {
                "name": "mnist",
                "labels": {"team": "nlp", "extra": "1"},
                "annotations": {"a": "b"},
                "spec": {"runtime": "torch-distributed", "image": "ghcr.io/me/train:1", "command": ["python", "t.py"], "args": ["-v"], "nodes": 2, "activeDeadlineSeconds": "60"},
            },
        )

    def test_what_only_a_manifest_says_goes_as_a_manifest(self) -> None:
        patch = o.RuntimePatch(o.TrainingRuntimeSpecPatch(o.JobSetTemplatePatch(metadata={"labels": {"x": "y"}})))
        body = train(
            kiln.CustomTrainerContainer(image="img", num_nodes=2, resources_per_node={"GPU": 1, "cpu": 4}, env={"A": "1"}),
            [patch, o.TrainerEnvFrom.secret("KEY", secret_name="s3", key="id")],
            initializer=kiln.Initializer(dataset=kiln.HuggingFaceDatasetInitializer(storage_uri="hf://a/b", access_token="hf_x"), model="hf://m/n"),
            queue="default",
            priority_class="high",
            ttl_seconds_after_finished=0,
            suspend=True,
            request_id="r1",
        )
        self.assertEqual((body["namespace"], body["requestId"]), ("default", "r1"))
        self.assertNotIn("trainJob", body)
        self.assertEqual(
            json.loads(body["manifest"]),
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"generateName": "torch-distributed-", "labels": {"kueue.x-k8s.io/queue-name": "default", "kueue.x-k8s.io/priority-class": "high"}},
                "spec": {
                    "runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
                    "trainer": {
                        "image": "img",
                        "env": [{"name": "A", "value": "1"}, {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "id"}}}],
                        "numNodes": 2,
                        "resourcesPerNode": {"requests": {"nvidia.com/gpu": "1", "cpu": "4"}, "limits": {"nvidia.com/gpu": "1", "cpu": "4"}},
                    },
                    "initializer": {"dataset": {"storageUri": "hf://a/b", "env": [{"name": "ACCESS_TOKEN", "value": "hf_x"}]}, "model": {"storageUri": "hf://m/n"}},
                    "runtimePatches": [{"trainingRuntimeSpec": {"template": {"metadata": {"labels": {"x": "y"}}}}, "manager": "trainer.kubeflow.org/kubeflow-sdk"}],
                    "suspend": True,
                    "ttlSecondsAfterFinished": 0,
                },
            },
        )

    def test_initializers_pass_their_settings_as_kubeflows_do(self) -> None:
        body = train(initializer=kiln.Initializer(model=kiln.HuggingFaceModelInitializer(storage_uri="hf://meta/llama"), dataset=kiln.S3DatasetInitializer(storage_uri="s3://b/d", endpoint="http://minio:9000")))
        init = json.loads(body["manifest"])["spec"]["initializer"]
        self.assertEqual(init["model"], {"storageUri": "hf://meta/llama", "env": [{"name": "IGNORE_PATTERNS", "value": "*.msgpack,*.h5,*.bin,*.pt,*.pth"}]})
        self.assertEqual(init["dataset"], {"storageUri": "s3://b/d", "env": [{"name": "ENDPOINT", "value": "http://minio:9000"}]})
        # A plain URI, or a dataset initializer with nothing set, is a NewTrainJob's URI.
        body = train(initializer=kiln.Initializer(dataset=kiln.HuggingFaceDatasetInitializer(storage_uri="hf://a/b"), model="hf://m/n"))
        self.assertEqual((body["trainJob"]["spec"]["datasetUri"], body["trainJob"]["spec"]["modelUri"]), ("hf://a/b", "hf://m/n"))

    def test_name_from_an_option_and_a_keyword_must_agree(self) -> None:
        with self.assertRaisesRegex(ValueError, r"name: train\(\) says 'a' and an option says 'b'; give one"):
            client("http://127.0.0.1:9").train(options=[o.Name("b")], name="a")
        with self.assertRaisesRegex(ValueError, r"options: 'labels' is not an option"):
            client("http://127.0.0.1:9").train(options=["labels"])

    def test_custom_trainer_ships_the_function_on_the_runtime_found_as_kubeflow_finds_it(self) -> None:
        try:
            import kiln._function  # noqa: F401
        except ImportError:
            self.skipTest("kiln._function (function trainers) is not there yet")
        trainer = kiln.CustomTrainer(func=train_func, num_nodes=2, resources_per_node={"gpu": 1}, env={"A": "1"})
        with serve(CreateTrainJob=lambda b: CREATED, GetRuntime=runtimes) as srv:
            client(srv.url).train("team-torch", trainer=trainer)
        # The namespace's TrainingRuntime first, as the Kubeflow SDK looks: it is there.
        self.assertEqual([r["method"] for r in srv.received], ["GetRuntime", "CreateTrainJob"])
        self.assertEqual(srv.received[0]["body"], {"name": "team-torch", "namespace": "default", "kind": "RUNTIME_KIND_NAMESPACED"})
        spec = srv.bodies("CreateTrainJob")[0]["trainJob"]["spec"]
        self.assertEqual((spec["runtime"], spec["runtimeKind"], spec["nodes"], spec["env"]), ("team-torch", "RUNTIME_KIND_NAMESPACED", 2, [{"name": "A", "value": "1"}]))
        self.assertEqual(spec["resourcesPerNode"]["limits"], {"nvidia.com/gpu": "1"})
        self.assertEqual(spec["command"][0], "bash")
        self.assertIn("train_func()", spec["command"][-1])
        self.assertIn("torchrun", spec["command"][-1])
        # None in the namespace: the cluster's, and its kind.
        with serve(CreateTrainJob=lambda b: CREATED, GetRuntime=runtimes) as srv:
            client(srv.url).train(trainer=trainer)
        self.assertEqual([r["body"].get("kind") for r in srv.received[:2]], ["RUNTIME_KIND_NAMESPACED", "RUNTIME_KIND_CLUSTER"])
        self.assertNotIn("runtimeKind", srv.bodies("CreateTrainJob")[0]["trainJob"]["spec"])

    def test_what_kiln_does_not_have_is_refused_by_name(self) -> None:
        c = client("http://127.0.0.1:9")
        with self.assertRaisesRegex(ValueError, r"BuiltinTrainer: Kiln has no built-in trainer yet"):
            c.train(trainer=kiln.BuiltinTrainer(config=kiln.TorchTuneConfig()))
        cache = kiln.DataCacheInitializer(storage_uri="cache://s/t", metadata_loc="s3://m", num_data_nodes=2)
        with self.assertRaisesRegex(ValueError, r"initializer.dataset: DataCacheInitializer is Kubeflow's distributed data cache, which Kiln does not have"):
            c.train(initializer=kiln.Initializer(dataset=cache))
        with serve(GetRuntime=runtimes) as srv:
            with self.assertRaisesRegex(ValueError, r"CustomTrainer can't be used with torchtune-llama runtime"):
                client(srv.url).train("torchtune-llama", trainer=kiln.CustomTrainer(func=train_func))
        with self.assertRaisesRegex(ValueError, r"topology: not taken together with RuntimePatch"):
            c.train(options=[o.RuntimePatch()], topology="rack", initializer=kiln.Initializer(model=kiln.HuggingFaceModelInitializer(storage_uri="hf://a/b")))

    def test_server_warnings_point_at_the_callers_line(self) -> None:
        answer = (200, {"trainJob": {"name": "mnist"}, "warnings": ["no quota"]})
        with serve(CreateTrainJob=lambda b: answer) as srv:
            with self.assertWarns(kiln.KilnWarning) as caught:
                client(srv.url).train(options=[o.RuntimePatch(o.TrainingRuntimeSpecPatch(o.JobSetTemplatePatch(metadata={"labels": {"a": "b"}})))])
        self.assertEqual(caught.filename, __file__)


class BackendConfigTest(unittest.TestCase):
    def test_container_backend_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, r"ContainerBackendConfig: Kiln has no Docker or Podman backend"):
            kiln.TrainerClient(kiln.ContainerBackendConfig())
        with self.assertRaisesRegex(ValueError, r"Invalid backend config"):
            kiln.TrainerClient(42)  # type: ignore[arg-type]

    def test_kubernetes_backend_config_calls_kiln(self) -> None:
        c = kiln.TrainerClient(kiln.KubernetesBackendConfig(namespace="team-a"), server="http://127.0.0.1:9", token="t", config_file="/nonexistent/kiln.yaml")
        self.assertEqual((c.namespace, c.server), ("team-a", "http://127.0.0.1:9"))

    def test_local_process_backend_takes_every_kubeflow_call(self) -> None:
        try:
            import kiln.backends.local  # noqa: F401
        except ImportError:
            self.skipTest("kiln.backends.local (the local process backend) is not there yet")
        calls: List[Tuple[str, Dict[str, Any]]] = []

        class Fake:
            def __init__(self, cfg: Any) -> None:
                self.cfg = cfg

            def __getattr__(self, name: str) -> Any:
                return lambda **kw: calls.append((name, kw)) or []

        with unittest.mock.patch("kiln.backends.local.LocalProcessBackend", Fake):
            cfg = kiln.LocalProcessBackendConfig(cleanup_venv=False)
            c = kiln.TrainerClient(cfg)
            self.assertIs(c._local.cfg, cfg)
            c.train(trainer=kiln.CustomTrainer(func=train_func), options=[o.Name("x")])
            c.list_jobs()
            c.get_job("x")
            list(c.get_job_logs("x"))
            c.wait_for_job_status("x")
            c.delete_job("x")
            c.list_runtimes()
            c.get_runtime("torch-distributed")
            with self.assertRaisesRegex(ValueError, r"queue: Kiln's API server settings"):
                c.train(queue="default")
            with self.assertRaisesRegex(ValueError, r"needs Kiln's API server"):
                c.list_queues()
        self.assertEqual(
            [n for n, _ in calls], ["train", "list_jobs", "get_job", "get_job_logs", "wait_for_job_status", "delete_job", "list_runtimes", "get_runtime"]
        )
        self.assertEqual(calls[3][1], {"name": "x", "step": "node-0", "follow": False})
        self.assertEqual(calls[4][1]["status"], {"Complete"})
        with self.assertRaisesRegex(ValueError, r"server: Kiln's API server settings"):
            kiln.TrainerClient(kiln.LocalProcessBackendConfig(), server="http://x")


if __name__ == "__main__":
    with warnings.catch_warnings():
        unittest.main()
