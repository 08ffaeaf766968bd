"""The Kubeflow SDK's training options (``kubeflow.trainer.options``, 0.5), applied as it applies them.

    from kiln import TrainerClient, CustomTrainerContainer
    from kiln.options import Name, Labels, RuntimePatch, TrainingRuntimeSpecPatch, ...

    client.train(trainer=CustomTrainerContainer(image="ghcr.io/me/train:1"),
                 options=[Name("mnist"), Labels({"team": "nlp"})])

Each option is a callable ``option(job_spec, trainer, backend)`` that writes its part of the
TrainJob manifest (``metadata.name``, ``metadata.labels``, ``spec.trainer.command``,
``spec.runtimePatches``...) into ``job_spec``, after checking that the backend and the trainer
take it; a mismatch is a ValueError naming the option, as in the Kubeflow SDK. ``Name`` works on
every backend, the others on the Kubernetes one (Kiln's API server). ``ActiveDeadlineSeconds``
sets ``spec.activeDeadlineSeconds`` (``train(active_deadline_seconds=)`` does the same).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from kiln.types import CustomTrainer, CustomTrainerContainer

__all__ = [
    "ActiveDeadlineSeconds",
    "Annotations",
    "ContainerPatch",
    "JobSetSpecPatch",
    "JobSetTemplatePatch",
    "JobSpecPatch",
    "JobTemplatePatch",
    "Labels",
    "Name",
    "PodSpecPatch",
    "PodTemplatePatch",
    "ReplicatedJobPatch",
    "RuntimePatch",
    "TrainerArgs",
    "TrainerCommand",
    "TrainerEnvFrom",
    "TrainingRuntimeSpecPatch",
]

#: The manager a runtime patch of this SDK carries, Kubeflow's: controllers and admission
#: webhooks each patch a TrainJob under their own.
SDK_MANAGER = "trainer.kubeflow.org/kubeflow-sdk"


def _on_kubernetes(option: str, backend: Any) -> None:
    """Refuses an option for a backend other than the Kubernetes one (Kiln's API server)."""
    if getattr(backend, "_backend_kind", None) != "kubernetes":
        raise ValueError(f"{option} option is not compatible with {type(backend).__name__}. Supported backends: KubernetesBackend")


def _trainer_spec(job_spec: Dict[str, Any]) -> Dict[str, Any]:
    return job_spec.setdefault("spec", {}).setdefault("trainer", {})


@dataclass
class Name:
    """Name the TrainJob (``.metadata.name``) instead of the generated name. Every backend."""

    name: str

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        job_spec.setdefault("metadata", {})["name"] = self.name


@dataclass
class Labels:
    """Labels of the TrainJob (``.metadata.labels``). Kubernetes backend."""

    labels: Dict[str, str]

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("Labels", backend)
        job_spec.setdefault("metadata", {})["labels"] = self.labels


@dataclass
class Annotations:
    """Annotations of the TrainJob (``.metadata.annotations``). Kubernetes backend."""

    annotations: Dict[str, str]

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("Annotations", backend)
        job_spec.setdefault("metadata", {})["annotations"] = self.annotations


@dataclass
class TrainerCommand:
    """The training container's command (``.spec.trainer.command``). Only with a
    CustomTrainerContainer: a CustomTrainer's command runs its function. Kubernetes backend."""

    command: List[str]

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("TrainerCommand", backend)
        if trainer is not None and not isinstance(trainer, CustomTrainerContainer):
            raise ValueError(
                "TrainerCommand can only be used with CustomTrainerContainer. CustomTrainer generates its own command "
                "from the function, and BuiltinTrainer uses pre-configured commands."
            )
        _trainer_spec(job_spec)["command"] = list(self.command)


@dataclass
class TrainerArgs:
    """The training container's arguments (``.spec.trainer.args``). Only with a
    CustomTrainerContainer. Kubernetes backend."""

    args: List[str]

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("TrainerArgs", backend)
        if trainer is not None and not isinstance(trainer, CustomTrainerContainer):
            raise ValueError(
                "TrainerArgs can only be used with CustomTrainerContainer. CustomTrainer generates its own arguments "
                "from the function, and BuiltinTrainer uses pre-configured arguments."
            )
        _trainer_spec(job_spec)["args"] = list(self.args)


class TrainerEnvFrom:
    """An environment variable of the training container taken from a Secret or a ConfigMap
    (``.spec.trainer.env[].valueFrom``), added to the trainer's ``env``. With a CustomTrainer or a
    CustomTrainerContainer. Kubernetes backend.

    ``value_from`` is a Kubernetes EnvVarSource: a dict such as ``{"secretKeyRef": {"name": "s3",
    "key": "id"}}``, or an object with ``to_dict()``. :meth:`secret` and :meth:`config_map` build
    the usual ones.
    """

    def __init__(self, env_name: str, value_from: Any) -> None:
        if not env_name:
            raise ValueError("env_name must be a non-empty string")
        self._env_name = env_name
        self._value_from = value_from

    @classmethod
    def secret(cls, env_name: str, *, secret_name: str, key: str) -> "TrainerEnvFrom":
        """A variable from the key of a Secret."""
        return cls(env_name, {"secretKeyRef": {"name": secret_name, "key": key}})

    @classmethod
    def config_map(cls, env_name: str, *, config_map_name: str, key: str) -> "TrainerEnvFrom":
        """A variable from the key of a ConfigMap."""
        return cls(env_name, {"configMapKeyRef": {"name": config_map_name, "key": key}})

    def __repr__(self) -> str:
        return f"TrainerEnvFrom({self._env_name!r}, {self._value_from!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrainerEnvFrom) and (self._env_name, self._value_from) == (other._env_name, other._value_from)

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("TrainerEnvFrom", backend)
        if trainer is not None and not isinstance(trainer, (CustomTrainer, CustomTrainerContainer)):
            raise ValueError(
                f"TrainerEnvFrom option is not compatible with {type(trainer).__name__}. Supported trainers: CustomTrainer, CustomTrainerContainer"
            )
        value_from = self._value_from.to_dict() if hasattr(self._value_from, "to_dict") else self._value_from
        if not isinstance(value_from, dict):
            raise ValueError(f"TrainerEnvFrom {self._env_name}: value_from must be an EnvVarSource (a dict), got {type(value_from).__name__}")
        _trainer_spec(job_spec).setdefault("env", []).append({"name": self._env_name, "valueFrom": value_from})


@dataclass
class ActiveDeadlineSeconds:
    """How long the job may run before it fails with reason DeadlineExceeded
    (``.spec.activeDeadlineSeconds``), in whole seconds, 1 or more. Kubernetes backend."""

    active_deadline_seconds: int

    def __post_init__(self) -> None:
        s = self.active_deadline_seconds
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise ValueError(f"activeDeadlineSeconds must be a positive integer (minimum 1), got {s!r}")

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("ActiveDeadlineSeconds", backend)
        job_spec.setdefault("spec", {})["activeDeadlineSeconds"] = self.active_deadline_seconds


# -- runtime patches (.spec.runtimePatches) ---------------------------------------------------


_ENV_SOURCES = {"configMapKeyRef", "secretKeyRef", "fieldRef", "resourceFieldRef"}


@dataclass
class ContainerPatch:
    """A patch of one container of the runtime's pods, named as in the runtime (``node`` is the
    trainer's): variables (``{"name", "value"}`` or ``{"name", "valueFrom"}``), volume mounts
    (``{"name", "mountPath"}``, an absolute path) and a security context, as Kubernetes spells them."""

    name: str
    env: Optional[List[dict]] = None
    volume_mounts: Optional[List[dict]] = None
    security_context: Optional[dict] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("Container name must be a non-empty string")
        if self.env is not None:
            if not isinstance(self.env, list):
                raise ValueError("env must be a list of dictionaries")
            for e in self.env:
                if not isinstance(e, dict):
                    raise ValueError("Each env entry must be a dictionary")
                if not e.get("name"):
                    raise ValueError("Each env entry must have a non-empty 'name' key")
                if "value" not in e and "valueFrom" not in e:
                    raise ValueError("Each env entry must have either 'value' or 'valueFrom' key")
                if "valueFrom" in e:
                    vf = e["valueFrom"]
                    if not isinstance(vf, dict):
                        raise ValueError("env 'valueFrom' must be a dictionary")
                    if not _ENV_SOURCES & set(vf):
                        raise ValueError(f"env 'valueFrom' must contain one of: {', '.join(sorted(_ENV_SOURCES))}")
        if self.volume_mounts is not None:
            if not isinstance(self.volume_mounts, list):
                raise ValueError("volume_mounts must be a list of dictionaries")
            for m in self.volume_mounts:
                if not isinstance(m, dict):
                    raise ValueError("Each volume_mounts entry must be a dictionary")
                if not m.get("name"):
                    raise ValueError("Each volume_mounts entry must have a non-empty 'name' key")
                path = m.get("mountPath")
                if not path or not isinstance(path, str):
                    raise ValueError("Each volume_mounts entry must have a non-empty 'mountPath' key")
                if not path.startswith("/"):
                    raise ValueError(f"volume_mounts 'mountPath' must be an absolute path (start with /): {path}")


@dataclass
class PodSpecPatch:
    """The pod spec fields a TrainJob may patch in its runtime's pods, as Kubernetes spells their
    values (dicts). ``termination_grace_period_seconds`` is Kiln's."""

    service_account_name: Optional[str] = None
    volumes: Optional[List[dict]] = None
    init_containers: Optional[List[ContainerPatch]] = None
    containers: Optional[List[ContainerPatch]] = None
    image_pull_secrets: Optional[List[dict]] = None
    security_context: Optional[dict] = None
    node_selector: Optional[Dict[str, str]] = None
    affinity: Optional[dict] = None
    tolerations: Optional[List[dict]] = None
    scheduling_gates: Optional[List[dict]] = None
    termination_grace_period_seconds: Optional[int] = None


@dataclass
class PodTemplatePatch:
    """A patch of a Job's pod template: its metadata (labels, annotations) and spec."""

    metadata: Optional[dict] = None
    spec: Optional[PodSpecPatch] = None


@dataclass
class JobSpecPatch:
    """A patch of a Job's spec: its pod template."""

    template: Optional[PodTemplatePatch] = None


@dataclass
class JobTemplatePatch:
    """A patch of a replicated job's Job template: its metadata and spec."""

    metadata: Optional[dict] = None
    spec: Optional[JobSpecPatch] = None


@dataclass
class ReplicatedJobPatch:
    """A patch of one replicated job of the runtime, by name (``node``, ``launcher``...)."""

    name: str
    template: Optional[JobTemplatePatch] = None


@dataclass
class JobSetSpecPatch:
    """A patch of the JobSet's spec: its replicated jobs."""

    replicated_jobs: Optional[List[ReplicatedJobPatch]] = None


@dataclass
class JobSetTemplatePatch:
    """A patch of the JobSet template: its metadata (labels, annotations) and spec."""

    metadata: Optional[dict] = None
    spec: Optional[JobSetSpecPatch] = None


@dataclass
class TrainingRuntimeSpecPatch:
    """A patch of the (Cluster)TrainingRuntime's spec: its JobSet template."""

    template: Optional[JobSetTemplatePatch] = None


@dataclass
class RuntimePatch:
    """A patch of the job's runtime, added to ``.spec.runtimePatches`` under the manager
    ``trainer.kubeflow.org/kubeflow-sdk``: pod templates, volumes, tolerations, node selectors,
    scheduling gates and container settings of the runtime's replicated jobs. Kubernetes backend."""

    training_runtime_spec: Optional[TrainingRuntimeSpecPatch] = None
    manager: str = dataclasses.field(default=SDK_MANAGER, init=False, repr=False)

    def __call__(self, job_spec: Dict[str, Any], trainer: Any, backend: Any) -> None:
        _on_kubernetes("RuntimePatch", backend)
        job_spec.setdefault("spec", {}).setdefault("runtimePatches", []).append(patch_to_dict(self))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def patch_to_dict(obj: Any) -> Any:
    """A patch dataclass as the API spells it: camelCase field names, with unset (None) fields and
    empty lists and patches left out; dicts and plain values as they are."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            continue
        if isinstance(value, list) or dataclasses.is_dataclass(value):
            value = [patch_to_dict(v) for v in value] if isinstance(value, list) else patch_to_dict(value)
            if not value:
                continue
        out[_camel(f.name)] = value
    return out
