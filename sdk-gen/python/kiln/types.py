"""The Kubeflow SDK's types (``kubeflow.trainer``, 0.5), as Kiln takes them.

Every name a Kubeflow script imports from ``kubeflow.trainer`` (or ``kubeflow.trainer.types.types``)
is here with the same fields, defaults and meaning, so that the script runs against Kiln with its
import line changed. Kiln's additions are fields with defaults after Kubeflow's, never in place
of them. ``tests/test_parity.py`` holds the two APIs side by side.

The backend configurations pick where :class:`kiln.TrainerClient` runs jobs:
:class:`KubernetesBackendConfig` (the default) through Kiln's API server,
:class:`LocalProcessBackendConfig` as processes on this machine. Kubeflow's
:class:`ContainerBackendConfig` (Docker, Podman) is accepted as a type and refused by the client.

Standard library only.
"""

from __future__ import annotations

import abc
import json
import logging
import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

__all__ = [
    "BuiltinTrainer",
    "ContainerBackendConfig",
    "CustomTrainer",
    "CustomTrainerContainer",
    "DataCacheInitializer",
    "DataFormat",
    "DATASET_PATH",
    "DataType",
    "Event",
    "HuggingFaceDatasetInitializer",
    "HuggingFaceModelInitializer",
    "Initializer",
    "KubernetesBackendConfig",
    "LocalProcessBackendConfig",
    "LoraConfig",
    "Loss",
    "MODEL_PATH",
    "Runtime",
    "RuntimeKind",
    "RuntimeTrainer",
    "S3DatasetInitializer",
    "S3ModelInitializer",
    "TorchTuneConfig",
    "TorchTuneInstructDataset",
    "TrainerType",
    "TrainingRuntimeSource",
    "TrainJobTemplate",
    "TRAINJOB_COMPLETE",
    "TRAINJOB_CREATED",
    "TRAINJOB_FAILED",
    "TRAINJOB_QUEUED",
    "TRAINJOB_RUNNING",
    "TRAINJOB_SUSPENDED",
    "normalize_resources",
    "update_trainjob_status",
]

# -- constants (kubeflow.trainer.constants) ----------------------------------------------------

#: A TrainJob's statuses in the Kubeflow SDK's words. Created: it exists, has not finished, and
#: not all of its training nodes run yet; Running: every training node runs (or is done).
TRAINJOB_CREATED = "Created"
TRAINJOB_RUNNING = "Running"
TRAINJOB_COMPLETE = "Complete"
TRAINJOB_FAILED = "Failed"
#: Kiln's own two: waiting in a Kueue queue, and stopped by a user. Kubeflow's SDK says Created.
TRAINJOB_QUEUED = "Queued"
TRAINJOB_SUSPENDED = "Suspended"

#: Where the initializers put the dataset and the model in the training pods.
WORKSPACE_PATH = "/workspace"
DATASET_PATH = os.path.join(WORKSPACE_PATH, "dataset")
MODEL_PATH = os.path.join(WORKSPACE_PATH, "model")

#: What a value the SDK cannot tell reads as (a device of a CPU-less container, say).
UNKNOWN = "Unknown"

#: The step names of a TrainJob, as the Kubeflow SDK says them: the initializers, and node-N for
#: the training nodes (an MPI job's launcher is node-0).
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
LAUNCHER = "launcher"
NODE = "node"

#: The files a model initializer skips unless told otherwise.
INITIALIZER_DEFAULT_IGNORE_PATTERNS = ["*.msgpack", "*.h5", "*.bin", "*.pt", "*.pth"]

#: The package indexes a CustomTrainer installs from: the first is the index, the others extra
#: ones. ``DEFAULT_PIP_INDEX_URLS`` (comma-separated) overrides them, as in the Kubeflow SDK.
DEFAULT_PIP_INDEX_URLS = os.getenv("DEFAULT_PIP_INDEX_URLS", "https://pypi.org/simple").split(",")

#: The runtime of a job that names none; ``DEFAULT_TRAINING_RUNTIME`` overrides it, as in the
#: Kubeflow SDK.
DEFAULT_TRAINING_RUNTIME = os.getenv("DEFAULT_TRAINING_RUNTIME", "torch-distributed")

# The entrypoints the Kubeflow SDK gives a runtime's trainer (RuntimeTrainer.command). The
# function's code is written to {func_file} and run with python, torchrun or mpirun.
_EXEC_FUNC_SCRIPT = (
    "\nread -r -d '' SCRIPT << EOM\n\n{func_code}\nEOM\n"
    'printf "%s" "$SCRIPT" > "{func_file}"\n__ENTRYPOINT__ "{func_file}"'
)
DEFAULT_COMMAND = ("bash", "-c", _EXEC_FUNC_SCRIPT.replace("__ENTRYPOINT__", "python"))
TORCH_COMMAND = ("bash", "-c", _EXEC_FUNC_SCRIPT.replace("__ENTRYPOINT__", "torchrun"))
MPI_COMMAND = ("mpirun", "--hostfile", "/etc/mpi/hostfile", *DEFAULT_COMMAND)
TORCH_TUNE_COMMAND = ("tune", "run")

# Resource names as the Kubeflow SDK spells them (resources_per_node and devices).
CPU_LABEL = "cpu"
GPU_LABEL = "nvidia.com/gpu"
GPU_MIG_PREFIX = "nvidia.com/mig-"
TPU_LABEL = "google.com/tpu"
NPU_LABEL = "huawei.com/Ascend910"


# -- trainers --------------------------------------------------------------------------------


@dataclass
class CustomTrainer:
    """A self-contained Python function that trains, run on each node of the job.

    ``func`` is shipped to the runtime's image with ``func_args`` as its keyword arguments,
    after ``packages_to_install`` are installed from ``pip_index_urls`` (the first is the index,
    the others extra ones). ``resources_per_node`` is e.g. ``{"gpu": 4, "cpu": 5, "memory":
    "10G"}`` or ``{"mig-1g.5gb": 1}`` (see :func:`normalize_resources`); ``env`` maps names to
    values. Unset fields take the runtime's.
    """

    func: Callable
    func_args: Optional[dict] = None
    image: Optional[str] = None
    packages_to_install: Optional[List[str]] = None
    pip_index_urls: List[str] = field(default_factory=lambda: list(DEFAULT_PIP_INDEX_URLS))
    num_nodes: Optional[int] = None
    resources_per_node: Optional[dict] = None
    env: Optional[Dict[str, str]] = None


@dataclass
class CustomTrainerContainer:
    """The training container of a job: what runs on each node. Unset fields take the runtime's.

    ``resources_per_node`` maps resource names to quantities, e.g.
    ``{"cpu": 4, "memory": "16Gi", "gpu": 8}`` (see :func:`normalize_resources`); ``env`` maps
    names to values. ``command``, ``args`` and ``num_procs_per_node`` are Kiln's (Kubeflow sets
    the first two with the TrainerCommand and TrainerArgs options); ``image`` may be left unset
    for the runtime's.
    """

    image: Optional[str] = None
    num_nodes: Optional[int] = None
    resources_per_node: Optional[Dict[str, Union[str, int, float]]] = None
    env: Optional[Dict[str, str]] = None
    command: Optional[List[str]] = None
    args: Optional[List[str]] = None
    num_procs_per_node: Optional[int] = None


class Loss(Enum):
    """Loss function for the TorchTune LLM Trainer."""

    CEWithChunkedOutputLoss = "torchtune.modules.loss.CEWithChunkedOutputLoss"


class DataType(Enum):
    """Data type for the TorchTune LLM Trainer."""

    BF16 = "bf16"
    FP32 = "fp32"


class DataFormat(Enum):
    """Data file type for the TorchTune LLM Trainer."""

    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"
    ARROW = "arrow"
    TEXT = "text"
    XML = "xml"


@dataclass
class TorchTuneInstructDataset:
    """A dataset of instruction prompts and responses for TorchTune (Kubeflow's BuiltinTrainer)."""

    source: Optional[DataFormat] = None
    split: Optional[str] = None
    train_on_input: Optional[bool] = None
    new_system_prompt: Optional[str] = None
    column_map: Optional[Dict[str, str]] = None


@dataclass
class LoraConfig:
    """LoRA/QLoRA/DoRA settings for TorchTune (Kubeflow's BuiltinTrainer)."""

    apply_lora_to_mlp: Optional[bool] = None
    apply_lora_to_output: Optional[bool] = None
    lora_attn_modules: List[str] = field(default_factory=lambda: ["q_proj", "v_proj", "output_proj"])
    lora_rank: Optional[int] = None
    lora_alpha: Optional[int] = None
    lora_dropout: Optional[float] = None
    quantize_base: Optional[bool] = None
    use_dora: Optional[bool] = None


@dataclass
class TorchTuneConfig:
    """TorchTune's fine-tuning settings (Kubeflow's BuiltinTrainer)."""

    dtype: Optional[DataType] = None
    batch_size: Optional[int] = None
    epochs: Optional[int] = None
    loss: Optional[Loss] = None
    num_nodes: Optional[int] = None
    peft_config: Optional[LoraConfig] = None
    dataset_preprocess_config: Optional[TorchTuneInstructDataset] = None
    resources_per_node: Optional[dict] = None


@dataclass
class BuiltinTrainer:
    """Kubeflow's configuration-driven trainer (TorchTune). Kiln has no built-in trainer yet:
    :meth:`kiln.TrainerClient.train` refuses it, saying so."""

    config: TorchTuneConfig


TORCH_TUNE = "torchtune"


class TrainerType(Enum):
    CUSTOM_TRAINER = CustomTrainer.__name__
    BUILTIN_TRAINER = BuiltinTrainer.__name__


# -- runtimes --------------------------------------------------------------------------------


class RuntimeKind(Enum):
    """Which Kubernetes object a runtime is."""

    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
    TRAINING_RUNTIME = "TrainingRuntime"


@dataclass
class RuntimeTrainer:
    """A runtime's trainer, as the Kubeflow SDK describes it: whether it takes a CustomTrainer or
    a BuiltinTrainer, the ML framework, the image, the default number of nodes, and the device
    and device count of all nodes together (``gpu`` and ``"16"`` for 2 nodes of 8 GPUs)."""

    trainer_type: TrainerType
    framework: str
    image: str
    num_nodes: int = 1  # the default value is set in the APIs
    device: str = UNKNOWN
    device_count: str = UNKNOWN
    _command: Tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    @property
    def command(self) -> Tuple[str, ...]:
        """The entrypoint a CustomTrainer's function runs with (python, torchrun or mpirun)."""
        return self._command

    def set_command(self, command: Tuple[str, ...]) -> None:
        self._command = tuple(command)


@dataclass(eq=False)
class Runtime:
    """A training runtime: the blueprint a job runs on.

    Kubeflow's fields come first: ``name``, ``trainer`` (a :class:`RuntimeTrainer`), ``kind`` and
    ``pretrained_model``. Kiln's follow: the namespace (empty for a ClusterTrainingRuntime), the
    framework, image and number of nodes (also in ``trainer``), whether it is cluster-wide and
    deprecated, its steps (replicated jobs), and the admin's default deadline and TTL. Either side
    may be given; the other is filled from it. A runtime compares equal to its name.
    """

    name: str
    trainer: Optional[RuntimeTrainer] = None
    kind: Optional[RuntimeKind] = None
    pretrained_model: Optional[str] = None
    namespace: str = ""
    framework: str = ""
    image: str = ""
    num_nodes: int = 0
    cluster: Optional[bool] = None
    deprecated: bool = False
    steps: List[str] = field(default_factory=list)
    active_deadline_seconds: Optional[int] = None
    ttl_seconds_after_finished: Optional[int] = None
    raw: Optional[Any] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.kind, str):
            self.kind = RuntimeKind(self.kind)
        if self.cluster is None:
            self.cluster = self.kind != RuntimeKind.TRAINING_RUNTIME
        if self.kind is None:
            self.kind = RuntimeKind.CLUSTER_TRAINING_RUNTIME if self.cluster else RuntimeKind.TRAINING_RUNTIME
        if self.trainer is None:
            self.trainer = RuntimeTrainer(
                trainer_type=TrainerType.BUILTIN_TRAINER if self.framework == TORCH_TUNE else TrainerType.CUSTOM_TRAINER,
                framework=self.framework or UNKNOWN,
                image=self.image,
                num_nodes=self.num_nodes or 1,
            )
            self.trainer.set_command(_command_of(self.framework, self.steps, 0))
        else:
            self.framework = self.framework or self.trainer.framework
            self.image = self.image or self.trainer.image
            self.num_nodes = self.num_nodes or self.trainer.num_nodes

    # A runtime is often named where one is expected (list_jobs(runtime=...), job.runtime == "x").
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.name == other
        if not isinstance(other, Runtime):
            return NotImplemented
        return (self.name, self.namespace, self.kind, self.trainer, self.pretrained_model) == (
            other.name,
            other.namespace,
            other.kind,
            other.trainer,
            other.pretrained_model,
        )

    def __hash__(self) -> int:
        return hash(self.name)

    @classmethod
    def from_proto(cls, r: Any) -> "Runtime":
        """The runtime the API server describes (a ``kiln.v1.Runtime``), with its trainer's
        device and device count counted as the Kubeflow SDK counts them."""
        from kiln._gen import kiln_v1 as pb

        rp = r.run_policy or pb.RunPolicy()
        limits = dict((r.resources_per_node or pb.Resources()).limits)
        if not limits:
            limits = {d.resource: str(d.count) for d in r.devices_per_node}
        trainer = RuntimeTrainer(
            trainer_type=TrainerType.BUILTIN_TRAINER if r.framework == TORCH_TUNE else TrainerType.CUSTOM_TRAINER,
            framework=r.framework,
            image=r.image,
        )
        device = device_of(limits)
        if device:
            trainer.device, trainer.device_count = device
        # The MPI plugin's processes per node override the count; then it is for all nodes.
        if r.procs_per_node:
            trainer.device_count = str(r.procs_per_node)
        if trainer.device_count.isdigit() and r.nodes:
            trainer.device_count = str(int(trainer.device_count) * r.nodes)
        if r.nodes:
            trainer.num_nodes = r.nodes
        trainer.set_command(_command_of(r.framework, list(r.steps), r.procs_per_node))
        return cls(
            name=r.name,
            trainer=trainer,
            kind=RuntimeKind.TRAINING_RUNTIME if r.kind == pb.RuntimeKind.RUNTIME_KIND_NAMESPACED else RuntimeKind.CLUSTER_TRAINING_RUNTIME,
            namespace=r.namespace,
            framework=r.framework,
            image=r.image,
            num_nodes=r.nodes,
            deprecated=r.deprecated,
            steps=list(r.steps),
            active_deadline_seconds=rp.active_deadline_seconds,
            ttl_seconds_after_finished=rp.ttl_seconds_after_finished,
            raw=r,
        )


def _command_of(framework: str, steps: List[str], procs_per_node: int) -> Tuple[str, ...]:
    """The entrypoint the Kubeflow SDK gives a runtime's trainer: TorchTune's, mpirun for an MPI
    runtime (one with a launcher), torchrun for torch, python otherwise."""
    if framework == TORCH_TUNE:
        return TORCH_TUNE_COMMAND
    if LAUNCHER in steps or procs_per_node or framework == "mpi":
        return MPI_COMMAND
    if framework == "torch":
        return TORCH_COMMAND
    return DEFAULT_COMMAND


def device_of(limits: Mapping[str, Any]) -> Optional[Tuple[str, str]]:
    """A container's device and device count from its resource limits, as the Kubeflow SDK reads
    them: ``gpu``, ``tpu``, a MIG profile (``mig-1g.5gb``), ``npu`` or ``cpu``; None without
    limits, or with neither of those."""
    if not limits:
        return None
    if GPU_LABEL in limits:
        return "gpu", str(limits[GPU_LABEL])
    if TPU_LABEL in limits:
        return "tpu", str(limits[TPU_LABEL])
    mig = sorted(k for k in limits if k.startswith(GPU_MIG_PREFIX))
    if len(mig) == 1:
        return mig[0].split("/", 1)[1], str(limits[mig[0]])
    if mig:
        return None  # Kubeflow's SDK refuses several MIG profiles; there is no one device
    if NPU_LABEL in limits:
        return "npu", str(limits[NPU_LABEL])
    if CPU_LABEL in limits:
        return "cpu", str(limits[CPU_LABEL])
    return None


def normalize_resources(resources: Mapping[str, Any]) -> Dict[str, Any]:
    """Resource names as Kubernetes knows them, from the Kubeflow SDK's spelling.

    As the Kubeflow SDK does: the standard names (``cpu``, ``memory``, ``gpu``, ``storage``,
    ``ephemeral-storage``) and MIG profiles are lower-cased, ``gpu`` is ``nvidia.com/gpu``,
    ``storage`` is ``ephemeral-storage`` and ``mig-<profile>`` is ``nvidia.com/mig-<profile>``;
    other (extended) resources keep their case. Two MIG profiles, or a GPU and a MIG profile,
    are refused. ``{"GPU": 1, "CPU": 2, "storage": "10Gi"}`` is ``{"nvidia.com/gpu": 1, "cpu":
    2, "ephemeral-storage": "10Gi"}``. Values are kept as given.
    """
    standard = {CPU_LABEL, "memory", "gpu", "storage", "ephemeral-storage"}
    aliases = {"gpu": GPU_LABEL, "storage": "ephemeral-storage"}
    out: Dict[str, Any] = {}
    for k, v in resources.items():
        key = k.lower() if k.lower() in standard or k.lower().startswith("mig-") else k
        out[aliases.get(key, key)] = v
    for k in [k for k in out if k.startswith("mig-")]:
        out[GPU_MIG_PREFIX + k[len("mig-") :]] = out.pop(k)
    mig = [k for k in out if k.startswith(GPU_MIG_PREFIX)]
    if len(mig) > 1:
        raise ValueError(f"Multiple MIG resource types are not supported: {mig}")
    if mig and GPU_LABEL in out:
        raise ValueError(f"GPU ({GPU_LABEL}) and MIG ({mig[0]}) cannot be requested together")
    return out


# -- jobs ------------------------------------------------------------------------------------


@dataclass
class Event:
    """A Kubernetes event about a job or an object it owns.

    Kubeflow's fields: the object's kind and name, the message, the reason and when it was first
    recorded (``event_time``). Kiln's: ``type`` (Normal or Warning), ``object`` (``Kind/name``),
    how often it happened, when first and last, and the component that reported it.
    """

    involved_object_kind: str
    involved_object_name: str
    message: str
    reason: str
    event_time: Optional[datetime]
    type: str = ""
    object: str = ""
    count: int = 0
    first_time: Optional[datetime] = None
    last_time: Optional[datetime] = None
    source: str = ""


# -- initializers ----------------------------------------------------------------------------


@dataclass
class BaseInitializer(abc.ABC):
    """What every initializer has: where the data is."""

    storage_uri: str


def _validate_hf_storage_uri(storage_uri: str, entity: str) -> None:
    if not storage_uri.startswith("hf://"):
        raise ValueError(f"storage_uri must start with 'hf://', got {storage_uri}")
    parsed = urllib.parse.urlparse(storage_uri)
    if not parsed.netloc or not parsed.path.strip("/"):
        raise ValueError(f"storage_uri: must have absolute path with 'hf://<user_name>/<{entity}>', got {storage_uri}")


@dataclass
class HuggingFaceDatasetInitializer(BaseInitializer):
    """A dataset of the Hugging Face Hub, ``hf://<user>/<dataset>``."""

    ignore_patterns: Optional[List[str]] = None
    access_token: Optional[str] = None

    def __post_init__(self) -> None:
        _validate_hf_storage_uri(self.storage_uri, "dataset_name")


@dataclass
class S3DatasetInitializer(BaseInitializer):
    """A dataset in S3-compatible storage, ``s3://<bucket>/<path>``."""

    ignore_patterns: Optional[List[str]] = None
    endpoint: Optional[str] = None
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = None
    region: Optional[str] = None
    role_arn: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.storage_uri.startswith("s3://"):
            raise ValueError(f"storage_uri must start with 's3://', got {self.storage_uri}")


@dataclass
class DataCacheInitializer(BaseInitializer):
    """Kubeflow's distributed data cache, ``cache://<schema>/<table>``. Kiln has none:
    :meth:`kiln.TrainerClient.train` refuses it, saying so."""

    metadata_loc: str
    num_data_nodes: int
    head_cpu: Optional[str] = None
    head_mem: Optional[str] = None
    worker_cpu: Optional[str] = None
    worker_mem: Optional[str] = None
    iam_role: Optional[str] = None

    def __post_init__(self) -> None:
        if self.num_data_nodes <= 1:
            raise ValueError(f"num_data_nodes must be greater than 1, got {self.num_data_nodes}")
        if not self.storage_uri.startswith("cache://"):
            raise ValueError(f"storage_uri must start with 'cache://', got {self.storage_uri}")
        if len(self.storage_uri[len("cache://") :].split("/")) != 2:
            raise ValueError(f"storage_uri must be in format 'cache://<SCHEMA_NAME>/<TABLE_NAME>', got {self.storage_uri}")


@dataclass
class HuggingFaceModelInitializer(BaseInitializer):
    """A model of the Hugging Face Hub, ``hf://<user>/<model>``."""

    ignore_patterns: Optional[List[str]] = field(default_factory=lambda: INITIALIZER_DEFAULT_IGNORE_PATTERNS)
    access_token: Optional[str] = None

    def __post_init__(self) -> None:
        _validate_hf_storage_uri(self.storage_uri, "model_name")


@dataclass
class S3ModelInitializer(BaseInitializer):
    """A model in S3-compatible storage, ``s3://<bucket>/<path>``."""

    ignore_patterns: Optional[List[str]] = field(default_factory=lambda: INITIALIZER_DEFAULT_IGNORE_PATTERNS)
    endpoint: Optional[str] = None
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = None
    region: Optional[str] = None
    role_arn: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.storage_uri.startswith("s3://"):
            raise ValueError(f"storage_uri must start with 's3://', got {self.storage_uri}")


@dataclass
class Initializer:
    """What the runtime's initializers download before training: a dataset and a model. Each is
    one of the initializer classes above, or (Kiln's) a URI string such as ``hf://tatsu-lab/alpaca``
    or any object with a ``storage_uri``."""

    dataset: Optional[Union[HuggingFaceDatasetInitializer, S3DatasetInitializer, DataCacheInitializer, str, Any]] = None
    model: Optional[Union[HuggingFaceModelInitializer, S3ModelInitializer, str, Any]] = None


def initializer_source(what: str, v: Any) -> Tuple[str, List[Dict[str, str]]]:
    """An initializer's storage URI and environment, as the Kubeflow SDK sends them: each optional
    field that is set becomes a variable of its upper-cased name (lists comma-separated)."""
    if v is None:
        return "", []
    if isinstance(v, str):
        return v, []
    if isinstance(v, DataCacheInitializer) or type(v).__name__ == "DataCacheInitializer":
        raise ValueError(
            f"initializer.{what}: DataCacheInitializer is Kubeflow's distributed data cache, which Kiln does not have: "
            "use HuggingFaceDatasetInitializer, S3DatasetInitializer or a storage URI"
        )
    uri = getattr(v, "storage_uri", None)
    if not isinstance(uri, str):
        raise TypeError(f"initializer.{what}: want a URI string or an initializer with storage_uri, got {type(v).__name__}")
    env: List[Dict[str, str]] = []
    if is_dataclass(v):
        for f in fields(v):
            value = getattr(v, f.name)
            if f.name == "storage_uri" or value is None:
                continue
            if isinstance(value, list):
                value = ",".join(str(x) for x in value)
            env.append({"name": f.name.upper(), "value": str(value)})
    return uri, env


@dataclass
class TrainJobTemplate:
    """A job's template: its trainer, runtime and initializer, as :meth:`train` takes them
    (``client.train(**template)``)."""

    trainer: CustomTrainer
    runtime: Optional[Union[str, Runtime]] = None
    initializer: Optional[Initializer] = None

    def keys(self) -> List[str]:
        return ["trainer", "runtime", "initializer"]

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


# -- backends --------------------------------------------------------------------------------


@dataclass
class KubernetesBackendConfig:
    """Run jobs on a Kubernetes cluster, through Kiln's API server (the default backend).

    ``namespace`` is where jobs go (default: the Kiln configuration's, else the kubeconfig
    context's, else the pod's, else ``default``). ``config_file`` and ``context`` pick a
    kubeconfig and its context whose credentials call Kiln (its bearer token, token file or
    exec plugin); ``client_configuration`` is a ``kubernetes.client.Configuration`` whose API key
    is taken as the token. Kiln's API server is found as :func:`kiln.config.resolve_kubernetes`
    says.
    """

    namespace: Optional[str] = None
    config_file: Optional[str] = None
    context: Optional[str] = None
    client_configuration: Optional[Any] = None


@dataclass
class LocalProcessBackendConfig:
    """Run jobs as processes on this machine, with ``env`` added to their environment.

    Kiln's additions: ``python`` is the interpreter jobs run with (default: this one; e.g.
    ``/usr/bin/python3`` for Debian's python3-torch); the trainer's packages must be importable
    by it, unless ``install_packages`` builds a throwaway virtual environment that pip installs
    them into (``cleanup_venv`` removes it after the job), which needs a reachable package
    index. ``state_dir`` keeps each job's program and logs (default: a temporary directory
    removed when the program exits)."""

    cleanup_venv: bool = True
    env: Dict[str, str] = field(default_factory=dict)
    python: Optional[str] = None
    install_packages: bool = False
    state_dir: Optional[str] = None


@dataclass
class TrainingRuntimeSource:
    """Where Kubeflow's container backend reads runtimes from (github://, https://, file://)."""

    sources: List[str] = field(default_factory=lambda: ["github://kubeflow/trainer"])


@dataclass
class ContainerBackendConfig:
    """Kubeflow's Docker/Podman backend. Accepted as a type; :class:`kiln.TrainerClient` refuses it,
    saying what to use instead."""

    pull_policy: str = "IfNotPresent"
    auto_remove: bool = True
    container_host: Optional[str] = None
    container_runtime: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    volumes: Dict[str, Dict[str, str]] = field(default_factory=dict)
    runtime_source: TrainingRuntimeSource = field(default_factory=TrainingRuntimeSource)
    dataset_initializer_image: str = "ghcr.io/kubeflow/trainer/dataset-initializer:latest"
    model_initializer_image: str = "ghcr.io/kubeflow/trainer/model-initializer:latest"
    initializer_timeout: int = 600


# -- reporting from a training pod -----------------------------------------------------------

_log = logging.getLogger(__name__)
_status_lock = threading.Lock()
_last_status_update = 0.0
_MIN_STATUS_INTERVAL = 5.0
_MAX_STATUS_METRICS = 256


def update_trainjob_status(
    progress_percent: Optional[int] = None,
    estimated_remaining_seconds: Optional[int] = None,
    metrics: Optional[Dict[str, Union[float, int, str]]] = None,
) -> bool:
    """Report training progress to the job's TrainJob (``status.trainerStatus``), as the Kubeflow
    SDK's function does: one POST now, at most one every 5 seconds (a call sooner returns False),
    True when the server took it. Outside a training pod (no ``KUBEFLOW_TRAINER_SERVER_URL``) it
    returns False; it never raises. :mod:`kiln.progress` reports in the background instead, with
    steps, an ETA and retries."""
    global _last_status_update
    try:
        url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
        if not url:
            return False
        with _status_lock:
            if time.monotonic() - _last_status_update < _MIN_STATUS_INTERVAL:
                return False
        token_path = os.environ.get("KUBEFLOW_TRAINER_SERVER_TOKEN")
        if not token_path or not os.path.exists(token_path):
            return False
        with open(token_path, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            return False
        status: Dict[str, Any] = {"lastUpdatedTime": datetime.now(timezone.utc).isoformat()}
        if progress_percent is not None:
            status["progressPercentage"] = max(0, min(100, int(progress_percent)))
        if estimated_remaining_seconds is not None:
            status["estimatedRemainingSeconds"] = max(0, int(estimated_remaining_seconds))
        if metrics:
            items = list(metrics.items())[:_MAX_STATUS_METRICS]
            status["metrics"] = [{"name": str(k), "value": str(v)} for k, v in items]
        ca = os.environ.get("KUBEFLOW_TRAINER_SERVER_CA_CERT")
        context = ssl.create_default_context(cafile=ca if ca and os.path.exists(ca) else None)
        req = urllib.request.Request(
            url,
            data=json.dumps({"trainerStatus": status}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=5, context=context if url.startswith("https") else None) as resp:
            ok = resp.status == 200
        if ok:
            with _status_lock:
                _last_status_update = time.monotonic()
        return ok
    except urllib.error.HTTPError as e:
        _log.warning("Status update failed: HTTP %s", e.code)
        return False
    except Exception as e:  # noqa: BLE001 - reporting must never stop training
        _log.warning("Failed to send status update: %s", e)
        return False
