"""TrainerClient: submit, follow and control training jobs, as the Kubeflow SDK's does.

A job submitted here is a ``trainer.kubeflow.org/v1alpha1`` TrainJob: kubectl, the ``kiln``
CLI and the Kubeflow SDK see the same object. A schedule is a ``kiln.dev/v1alpha1``
CronTrainJob that creates such a TrainJob, a run, at each scheduled time. Every call goes
through the Kiln API server, which acts as you in Kubernetes, so Kubernetes RBAC decides what
you may see and do.

The client takes the Kubeflow SDK's (``kubeflow.trainer`` 0.5) calls with the same arguments,
defaults and meaning; Kiln's additions are keyword arguments. Statuses and step names are
Kubeflow's words, mapped from the API server's in one place each (:func:`_status_of`,
:func:`_kubeflow_step_names` and :func:`_kiln_step_name`).
"""

from __future__ import annotations

import copy
import json
import re
import time
import uuid
import warnings
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

from kiln import config as _config
from kiln import errors
from kiln._connect import Transport
from kiln._gen import kiln_v1 as pb
from kiln.types import (
    DATASET_INITIALIZER,
    DEFAULT_TRAINING_RUNTIME,
    LAUNCHER,
    MODEL_INITIALIZER,
    NODE,
    NPU_LABEL,
    TRAINJOB_COMPLETE,
    TRAINJOB_CREATED,
    TRAINJOB_FAILED,
    TRAINJOB_QUEUED,
    TRAINJOB_RUNNING,
    TRAINJOB_SUSPENDED,
    UNKNOWN,
    BuiltinTrainer,
    ContainerBackendConfig,
    CustomTrainer,
    CustomTrainerContainer,
    Event,
    Initializer,
    KubernetesBackendConfig,
    LocalProcessBackendConfig,
    Runtime,
    RuntimeKind,
    RuntimeTrainer,
    TrainerType,
    initializer_source,
    normalize_resources,
)

__all__ = [
    "TrainerClient",
    "CustomTrainerContainer",
    "Initializer",
    "TrainJob",
    "Step",
    "Schedule",
    "Runtime",
    "RuntimeTrainer",
    "RuntimeRef",
    "Queue",
    "Event",
    "Progress",
    "Checkpoint",
    "MetricPoint",
    "STATUSES",
    "DEFAULT_RUNTIME",
]

#: The runtime a job runs on when train() names none, as in the Kubeflow SDK (whose
#: ``DEFAULT_TRAINING_RUNTIME`` variable overrides it here too).
DEFAULT_RUNTIME = DEFAULT_TRAINING_RUNTIME

#: The statuses a job reports, in the Kubeflow SDK's words, and the order a job passes them.
#: Created: the job exists, has not finished, and not all its training nodes run yet (pods
#: scheduling, pulling, initializers running); Running: every training node runs or is done.
#: Queued (waiting in a Kueue queue) and Suspended (stopped by a user) are Kiln's: Kubeflow's SDK
#: would call such a job Created.
STATUSES = (TRAINJOB_CREATED, TRAINJOB_QUEUED, TRAINJOB_RUNNING, TRAINJOB_SUSPENDED, TRAINJOB_COMPLETE, TRAINJOB_FAILED)

# The API server's state of a job in each status: Created and Running are both STATE_RUNNING
# (started; Running once every node is ready), the others one state each.
_STATE_FOR = {
    TRAINJOB_CREATED: pb.State.STATE_RUNNING,
    TRAINJOB_QUEUED: pb.State.STATE_QUEUED,
    TRAINJOB_RUNNING: pb.State.STATE_RUNNING,
    TRAINJOB_SUSPENDED: pb.State.STATE_SUSPENDED,
    TRAINJOB_COMPLETE: pb.State.STATE_COMPLETE,
    TRAINJOB_FAILED: pb.State.STATE_FAILED,
}
_STATUS_OF_STATE = {
    pb.State.STATE_QUEUED: TRAINJOB_QUEUED,
    pb.State.STATE_SUSPENDED: TRAINJOB_SUSPENDED,
    pb.State.STATE_COMPLETE: TRAINJOB_COMPLETE,
    pb.State.STATE_FAILED: TRAINJOB_FAILED,
}


def _status_of(st: pb.TrainJobStatus) -> str:
    """A job's status in the Kubeflow SDK's words: the one place they are read.

    The API server says it (``status.status``); from a server older than that, it follows from
    the state as the server would say it: a started job is Running once all its Jobs are ready
    or done, and Created before, as the Kubeflow SDK counts running training nodes.
    """
    if st.status in STATUSES:
        return st.status
    if st.state in _STATUS_OF_STATE:
        return _STATUS_OF_STATE[st.state]
    if st.state == pb.State.STATE_RUNNING:
        ready = sum((j.ready or 0) + (j.succeeded or 0) for j in st.jobs)
        total = sum((j.active or 0) + (j.succeeded or 0) for j in st.jobs)
        if ready > 0 and ready >= total:
            return TRAINJOB_RUNNING
    return TRAINJOB_CREATED


#: A schedule's concurrency policies, with CronJob's meaning (the API's unset means Allow).
_POLICIES = ("Allow", "Forbid", "Replace")
_POLICY_OF = {
    pb.ConcurrencyPolicy.CONCURRENCY_POLICY_UNSPECIFIED: "Allow",
    pb.ConcurrencyPolicy.CONCURRENCY_POLICY_ALLOW: "Allow",
    pb.ConcurrencyPolicy.CONCURRENCY_POLICY_FORBID: "Forbid",
    pb.ConcurrencyPolicy.CONCURRENCY_POLICY_REPLACE: "Replace",
}
_POLICY_NAMED = {
    "allow": pb.ConcurrencyPolicy.CONCURRENCY_POLICY_ALLOW,
    "forbid": pb.ConcurrencyPolicy.CONCURRENCY_POLICY_FORBID,
    "replace": pb.ConcurrencyPolicy.CONCURRENCY_POLICY_REPLACE,
}

# -- step names ------------------------------------------------------------------------------
# The API server names a step "<replicated job>-<index>": dataset-initializer-0, launcher-0,
# node-0. The Kubeflow SDK says dataset-initializer, model-initializer and node-N, where an MPI
# job's launcher is node-0 and its nodes node-1 and on.

_NODE_STEP = re.compile(r"^node-(\d+)$")


def _kubeflow_step_name(kiln_name: str, replicated_job: str, index: int, mpi: bool) -> str:
    """A step's name in the Kubeflow SDK's words."""
    if replicated_job in (DATASET_INITIALIZER, MODEL_INITIALIZER) and kiln_name == f"{replicated_job}-0":
        return replicated_job
    if replicated_job == LAUNCHER and kiln_name == f"{LAUNCHER}-0":
        return f"{NODE}-0"
    if replicated_job == NODE and mpi and kiln_name == f"{NODE}-{index}":
        return f"{NODE}-{index + 1}"
    return kiln_name


def _kiln_step_name(step: str, mpi: bool) -> str:
    """The API server's name of a step named in the Kubeflow SDK's words; its own names pass."""
    if step in (DATASET_INITIALIZER, MODEL_INITIALIZER):
        return f"{step}-0"
    m = _NODE_STEP.match(step)
    if m and mpi:
        n = int(m.group(1))
        return f"{LAUNCHER}-0" if n == 0 else f"{NODE}-{n - 1}"
    return step


def _has_launcher(j: pb.TrainJob) -> bool:
    """Whether a job runs with an MPI launcher (its node-0, in the Kubeflow SDK's words)."""
    st = j.status or pb.TrainJobStatus()
    return any(x.name == LAUNCHER for x in st.jobs) or any(s.replicated_job == LAUNCHER for s in st.steps)


@dataclass
class Step:
    """One pod of a job: a training node (``node-0``), a launcher or an initializer.

    ``name`` is the Kubeflow SDK's: ``dataset-initializer``, ``model-initializer``, ``node-N``
    (an MPI job's launcher is ``node-0``); ``kiln_name`` is the API server's (and the ``kiln``
    CLI's): ``dataset-initializer-0``, ``launcher-0``, ``node-0``. Either names the step for
    :meth:`TrainerClient.get_job_logs`.
    """

    name: str
    status: str
    pod: str = ""
    node: str = ""
    devices: Dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    exit_code: Optional[int] = None
    reason: str = ""
    message: str = ""
    replicated_job: str = ""
    kiln_name: str = ""

    # The Kubeflow SDK's names for the same facts.
    @property
    def pod_name(self) -> str:
        """The pod's name (Kubeflow SDK's name for :attr:`pod`)."""
        return self.pod

    @property
    def device(self) -> str:
        """The kind of device the step runs on, as the Kubeflow SDK says it: ``gpu``, ``tpu``, a
        MIG profile (``mig-1g.5gb``), ``npu`` (from the device resource's name) or ``cpu``."""
        for resource in sorted(self.devices):
            if resource == NPU_LABEL:
                return "npu"
            short = resource.rsplit("/", 1)[-1]
            if short.startswith("mig-"):
                return short
            return "gpu" if "gpu" in short else ("tpu" if "tpu" in short else short)
        return "cpu"

    @property
    def device_count(self) -> str:
        """How many devices the step has, as a string (the Kubeflow SDK's), ``Unknown`` for none."""
        return str(sum(self.devices.values())) if self.devices else UNKNOWN


def _steps_of(st: pb.TrainJobStatus, mpi: bool) -> List[Step]:
    return [
        Step(
            name=s.kubeflow_name or _kubeflow_step_name(s.name, s.replicated_job, s.index, mpi),
            status=s.phase,
            pod=s.pod,
            node=s.node,
            devices={d.resource: d.count for d in s.devices},
            restarts=s.restarts,
            exit_code=s.exit_code,
            reason=s.reason,
            message=s.message,
            replicated_job=s.replicated_job,
            kiln_name=s.name,
        )
        for s in st.steps
    ]


class RuntimeRef(str):
    """A runtime's name with the Kubeflow SDK's ``.name``. Kept for code written for it: a job's
    runtime is now a :class:`Runtime` (which compares equal to its name)."""

    @property
    def name(self) -> str:
        return str(self)


@dataclass
class Checkpoint:
    """A checkpoint a job's trainer saved: its step and where it is."""

    step: int
    path: str


@dataclass
class Progress:
    """What a job's trainer last reported (its TrainJob's ``status.trainerStatus``, e.g. with
    :mod:`kiln.progress`), with what Kiln reads from it."""

    #: percent complete (0 to 100), and the trainer's estimate of the training time left;
    #: None when it does not know them.
    percent: Optional[int] = None
    eta_seconds: Optional[int] = None
    #: from the metrics of those names; None when not reported.
    step: Optional[int] = None
    total_steps: Optional[int] = None
    #: the latest values as reported (strings), in the trainer's order.
    metrics: Dict[str, str] = field(default_factory=dict)
    #: when the trainer observed this.
    update_time: Optional[datetime] = None
    #: the newest checkpoint the trainer reported; None before the first.
    checkpoint: Optional[Checkpoint] = None
    #: the job's ``kiln.dev/progress-deadline``: how long it may go without reporting before
    #: Kiln restarts it once, then fails it; and when that falls due if the job stays silent
    #: (None while it does not run).
    progress_deadline_seconds: Optional[int] = None
    stall_time: Optional[datetime] = None

    @classmethod
    def from_proto(cls, p: pb.Progress) -> "Progress":
        c = p.checkpoint
        return cls(
            percent=p.percent,
            eta_seconds=p.eta_seconds,
            step=p.step,
            total_steps=p.total_steps,
            metrics={m.name: m.value for m in p.metrics},
            update_time=p.update_time,
            checkpoint=Checkpoint(step=c.step, path=c.path) if c else None,
            progress_deadline_seconds=p.progress_deadline_seconds,
            stall_time=p.stall_time,
        )


@dataclass
class MetricPoint:
    """One value of a metric: when the trainer reported it, at which step (None when it
    reported none), and the value."""

    time: Optional[datetime]
    step: Optional[int]
    value: float



@dataclass
class TrainJob:
    """A job and what happens to it. ``status`` is one of :data:`STATUSES`.

    The Kubeflow SDK's fields: ``name``, ``runtime`` (a :class:`Runtime`, equal to its name),
    ``steps``, ``num_nodes``, ``creation_timestamp``, ``status``. The others are Kiln's."""

    name: str
    namespace: str
    #: the job's runtime: its name and kind, and from the client its trainer as the runtime has it.
    runtime: Runtime
    status: str
    reason: str
    message: str
    num_nodes: int
    creation_timestamp: Optional[datetime]
    start_time: Optional[datetime] = None
    completion_time: Optional[datetime] = None
    #: when the active deadline fails the job, while it runs.
    deadline_time: Optional[datetime] = None
    #: when the TTL deletes the finished job.
    ttl_delete_time: Optional[datetime] = None
    #: the deadline and TTL in force: the job's own, else its runtime's runPolicy.
    active_deadline_seconds: Optional[int] = None
    ttl_seconds_after_finished: Optional[int] = None
    #: the Kueue LocalQueue, and where the job waits in it (0 when not waiting).
    queue: str = ""
    queue_position: int = 0
    labels: Dict[str, str] = field(default_factory=dict)
    steps: List[Step] = field(default_factory=list)
    #: restarts of all the job's pods together by its runtime's failure policy, and those of
    #: them that counted against its maxRestarts (disruptions do not); docs/fault-tolerance.md.
    restarts: int = 0
    restarts_counted: int = 0
    #: what the job's trainer last reported (None until it reports), and its latest metric
    #: values by name; :meth:`TrainerClient.get_job_metrics` returns their history.
    progress: Optional[Progress] = None
    metrics: Dict[str, str] = field(default_factory=dict)
    #: the API's message, with every field the server returned.
    raw: Optional[pb.TrainJob] = field(default=None, repr=False)

    @classmethod
    def from_proto(cls, j: pb.TrainJob, runtime: Optional[Runtime] = None) -> "TrainJob":
        """The job the API server describes; ``runtime`` is its runtime as the client found it
        (without one, a runtime of the job's name and kind whose trainer is Unknown)."""
        spec, st = j.spec or pb.TrainJobSpec(), j.status or pb.TrainJobStatus()
        q = st.queue or pb.QueuePosition()
        if runtime is None:
            runtime = _named_runtime(spec.runtime, spec.runtime_kind, j.namespace)
        return cls(
            name=j.name,
            namespace=j.namespace,
            runtime=runtime,
            status=_status_of(st),
            reason=st.reason,
            message=st.message,
            num_nodes=spec.nodes,
            creation_timestamp=j.create_time,
            start_time=st.start_time,
            completion_time=st.completion_time,
            deadline_time=st.deadline_time,
            ttl_delete_time=st.ttl_delete_time,
            active_deadline_seconds=st.active_deadline_seconds,
            ttl_seconds_after_finished=st.ttl_seconds_after_finished,
            queue=spec.queue or q.local_queue,
            queue_position=q.position_in_local_queue,
            labels=dict(j.labels),
            steps=_steps_of(st, _has_launcher(j) or LAUNCHER in runtime.steps),
            restarts=(st.restarts or pb.Restarts()).count,
            restarts_counted=(st.restarts or pb.Restarts()).counted_towards_max,
            progress=Progress.from_proto(st.progress) if st.progress else None,
            metrics={m.name: m.value for m in (st.progress or pb.Progress()).metrics},
            raw=j,
        )


def _named_runtime(name: str, kind: pb.RuntimeKind, namespace: str) -> Runtime:
    """A runtime known by its name and kind only (its trainer Unknown)."""
    namespaced = kind == pb.RuntimeKind.RUNTIME_KIND_NAMESPACED
    return Runtime(
        name=name,
        trainer=RuntimeTrainer(trainer_type=TrainerType.CUSTOM_TRAINER, framework=UNKNOWN, image=""),
        kind=RuntimeKind.TRAINING_RUNTIME if namespaced else RuntimeKind.CLUSTER_TRAINING_RUNTIME,
        namespace=namespace if namespaced else "",
    )


@dataclass
class Schedule:
    """A schedule (a CronTrainJob) and what it did. ``concurrency_policy`` is ``Allow``,
    ``Forbid`` or ``Replace``; ``runtime``, ``image``, ``num_nodes``, ``queue`` and
    ``active_deadline_seconds`` are what the schedule sets for each run (an empty image, 0
    nodes or no deadline take the runtime's)."""

    name: str
    namespace: str
    schedule: str
    time_zone: str
    concurrency_policy: str
    suspend: bool
    #: a run that could not start this long after its scheduled time is skipped.
    starting_deadline_seconds: Optional[int] = None
    #: how many completed and failed runs are kept (None: the server's 3 and 1).
    successful_jobs_history_limit: Optional[int] = None
    failed_jobs_history_limit: Optional[int] = None
    runtime: str = ""
    image: str = ""
    num_nodes: int = 0
    queue: str = ""
    active_deadline_seconds: Optional[int] = None
    #: the names of the runs that have not finished.
    active: List[str] = field(default_factory=list)
    last_schedule_time: Optional[datetime] = None
    last_successful_time: Optional[datetime] = None
    #: the next time a run falls due; None while suspended.
    next_schedule_time: Optional[datetime] = None
    creation_timestamp: Optional[datetime] = None
    labels: Dict[str, str] = field(default_factory=dict)
    #: the API's message, with every field the server returned.
    raw: Optional[pb.CronTrainJob] = field(default=None, repr=False)

    @classmethod
    def from_proto(cls, s: pb.CronTrainJob) -> "Schedule":
        spec, st = s.spec or pb.CronTrainJobSpec(), s.status or pb.CronTrainJobStatus()
        run = (spec.train_job or pb.TrainJobTemplate()).spec or pb.TrainJobSpec()
        return cls(
            name=s.name,
            namespace=s.namespace,
            schedule=spec.schedule,
            time_zone=spec.time_zone,
            concurrency_policy=_POLICY_OF.get(spec.concurrency_policy, "Allow"),
            suspend=spec.suspend,
            starting_deadline_seconds=spec.starting_deadline_seconds,
            successful_jobs_history_limit=spec.successful_jobs_history_limit,
            failed_jobs_history_limit=spec.failed_jobs_history_limit,
            runtime=run.runtime,
            image=run.image,
            num_nodes=run.nodes,
            queue=run.queue,
            active_deadline_seconds=run.active_deadline_seconds,
            active=list(st.active),
            last_schedule_time=st.last_schedule_time,
            last_successful_time=st.last_successful_time,
            next_schedule_time=st.next_schedule_time,
            creation_timestamp=s.create_time,
            labels=dict(s.labels),
            raw=s,
        )



@dataclass
class Queue:
    """A Kueue LocalQueue: its workloads and its ClusterQueue's quota."""

    name: str
    namespace: str
    cluster_queue: str
    pending: int
    admitted: int
    active: bool
    message: str
    raw: Optional[pb.Queue] = field(default=None, repr=False)



Callback = Callable[[TrainJob], None]

# How long a runtime the client looked up for a job's ``runtime`` is reused.
_RUNTIME_CACHE_SECONDS = 60.0


class _NoServer:
    """The service clients of a client whose backend is not Kiln's API server."""

    def __init__(self, backend: str) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        raise ValueError(f"this call needs Kiln's API server; TrainerClient({self._backend}) runs jobs as local processes")


class TrainerClient:
    """The client of one Kiln API server, as the Kubeflow SDK's ``TrainerClient``.

    ``backend_config`` is the Kubeflow SDK's: :class:`KubernetesBackendConfig` (the default)
    calls Kiln's API server, :class:`LocalProcessBackendConfig` runs jobs as processes on this
    machine, and ``ContainerBackendConfig`` is refused. With no arguments the client reads the
    Kiln configuration as the ``kiln`` CLI does (the file ``make up`` writes, and ``KILN_*``
    variables), else a kubeconfig's credentials (or a pod's ServiceAccount) with the API server
    that ``KILN_API_SERVER`` names or the cluster publishes in its ConfigMap
    ``kube-public/kiln-info`` (:func:`kiln.config.resolve_kubernetes`). Kiln's keywords override
    it: ``server``, ``token``, ``token_file``, ``ca_file``, ``namespace``, and
    ``context``/``config_file`` to pick a Kiln configuration; ``server`` alone needs no file. A
    URL in place of ``backend_config`` is the ``server`` (this client's first argument before it
    took Kubeflow's).
    """

    def __init__(
        self,
        backend_config: Union[KubernetesBackendConfig, LocalProcessBackendConfig, ContainerBackendConfig, str, None] = None,
        *,
        server: Optional[str] = None,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        ca_file: Optional[str] = None,
        namespace: Optional[str] = None,
        context: Optional[str] = None,
        config_file: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        if isinstance(backend_config, str):
            server, backend_config = server or backend_config, None
        self._local: Any = None
        self._runtime_cache: Dict[Tuple[int, str, str], Tuple[float, Runtime]] = {}
        if isinstance(backend_config, ContainerBackendConfig):
            raise ValueError(
                "ContainerBackendConfig: Kiln has no Docker or Podman backend; run jobs on Kubernetes through Kiln "
                "(KubernetesBackendConfig, the default) or as local processes (LocalProcessBackendConfig)"
            )
        if isinstance(backend_config, LocalProcessBackendConfig):
            given = [k for k, v in (("server", server), ("token", token), ("token_file", token_file), ("ca_file", ca_file), ("context", context), ("config_file", config_file)) if v]
            if given:
                raise ValueError(f"{', '.join(given)}: Kiln's API server settings; LocalProcessBackendConfig runs jobs on this machine")
            from kiln.backends.local import LocalProcessBackend

            self._local = LocalProcessBackend(backend_config)
            self._backend_kind = "localprocess"
            self.namespace = namespace or "default"
            self.server = ""
            self.jobs = self.runtimes = self.queues = self.info = self.schedules = self._transport = _NoServer("LocalProcessBackendConfig()")
            return
        if backend_config is not None and not isinstance(backend_config, KubernetesBackendConfig):
            raise ValueError(f"Invalid backend config '{backend_config}'")
        k = backend_config or KubernetesBackendConfig()
        ctx = _config.resolve_kubernetes(
            namespace or k.namespace,
            k.config_file,
            k.context,
            k.client_configuration,
            kiln_config=config_file,
            kiln_context=context,
            server=server,
            need_token=token is None and token_file is None,
        )
        if token is not None:
            ctx.token, ctx.token_file = token, ""
        if token_file is not None:
            ctx.token, ctx.token_file = "", token_file
        if ca_file is not None:
            ctx.certificate_authority, ctx.certificate_authority_data = ca_file, ""
        #: Options of kiln.options check the backend they apply to (Kubeflow's KubernetesBackend).
        self._backend_kind = "kubernetes"
        self.namespace = namespace or ctx.namespace or "default"
        self.server = ctx.server
        self._transport = Transport(
            ctx.server,
            token=ctx.token or None,
            token_file=ctx.token_file or None,
            ca_file=ctx.certificate_authority or None,
            ca_data=ctx.certificate_authority_data or None,
            timeout=timeout,
        )
        self.jobs = pb.TrainJobServiceClient(self._transport)
        self.runtimes = pb.RuntimeServiceClient(self._transport)
        self.queues = pb.QueueServiceClient(self._transport)
        self.info = pb.ServerServiceClient(self._transport)
        self.schedules = pb.CronTrainJobServiceClient(self._transport)

    # -- submit ---------------------------------------------------------------------------

    def train(
        self,
        runtime: Union[str, Runtime, None] = None,
        initializer: Optional[Initializer] = None,
        trainer: Union[CustomTrainer, CustomTrainerContainer, BuiltinTrainer, None] = None,
        options: Optional[Sequence[Any]] = None,
        *,
        queue: Optional[str] = None,
        priority_class: Optional[str] = None,
        active_deadline_seconds: Optional[int] = None,
        ttl_seconds_after_finished: Optional[int] = None,
        labels: Optional[Dict[str, str]] = None,
        annotations: Optional[Dict[str, str]] = None,
        name: Optional[str] = None,
        generate_name: Optional[str] = None,
        namespace: Optional[str] = None,
        suspend: bool = False,
        request_id: Optional[str] = None,
        topology: Optional[str] = None,
        topology_preferred: bool = False,
    ) -> str:
        """Submit a job and return its name.

        As the Kubeflow SDK's ``train(runtime, initializer, trainer, options)``: ``runtime``
        names a runtime (a ClusterTrainingRuntime; a :class:`Runtime` from :meth:`get_runtime`
        may be a namespace's TrainingRuntime) and defaults to ``torch-distributed``;
        ``trainer`` is a :class:`CustomTrainer` (a Python function, shipped to the runtime's
        image), a :class:`CustomTrainerContainer` (an image and its command) or None for the
        runtime's; ``initializer`` downloads a dataset and a model first; ``options`` are those
        of :mod:`kiln.options`, applied as the Kubeflow SDK applies them. A trainer passed where
        the initializer goes is refused, never swapped. ``BuiltinTrainer`` and
        ``DataCacheInitializer`` are refused: Kiln has neither yet.

        Kiln's keywords: ``queue`` (a Kueue LocalQueue), ``priority_class``,
        ``active_deadline_seconds`` and ``ttl_seconds_after_finished``, ``labels`` and
        ``annotations`` (added to those of the Labels and Annotations options), ``name`` (else
        the server picks one from ``generate_name``, default the runtime's name and a dash),
        ``namespace``, ``suspend``. ``topology`` places all training nodes in one domain of a
        level of the queue's Kueue Topology, e.g. ``"rack"`` or ``"block"`` (or a node label): the
        job waits until one has room, or, with ``topology_preferred=True``, is spread when none
        has. The call carries a request id (random unless given): retried after a lost answer,
        it returns the job the first attempt created instead of creating a second one.
        """
        if self._local is not None:
            kiln_only = {
                k: v
                for k, v in dict(queue=queue, priority_class=priority_class, active_deadline_seconds=active_deadline_seconds, ttl_seconds_after_finished=ttl_seconds_after_finished,
                                 labels=labels, annotations=annotations, name=name, generate_name=generate_name, namespace=namespace, request_id=request_id, topology=topology).items()
                if v
            }
            if kiln_only or suspend or topology_preferred:
                raise ValueError(f"{', '.join(sorted(kiln_only) or ['suspend'])}: Kiln's API server settings; LocalProcessBackendConfig takes Kubeflow's arguments only")
            return self._local.train(runtime=runtime, initializer=initializer, trainer=trainer, options=options)
        return self._train(
            runtime, initializer, trainer, options,
            queue=queue, priority_class=priority_class, active_deadline_seconds=active_deadline_seconds, ttl_seconds_after_finished=ttl_seconds_after_finished,
            labels=labels, annotations=annotations, name=name, generate_name=generate_name, namespace=namespace, suspend=suspend, request_id=request_id,
            topology=topology, topology_preferred=topology_preferred,
        )  # fmt: skip

    def _train(
        self,
        runtime: Union[str, Runtime, None],
        initializer: Optional[Initializer],
        trainer: Any,
        options: Optional[Sequence[Any]],
        *,
        queue: Optional[str],
        priority_class: Optional[str],
        active_deadline_seconds: Optional[int],
        ttl_seconds_after_finished: Optional[int],
        labels: Optional[Dict[str, str]],
        annotations: Optional[Dict[str, str]],
        name: Optional[str],
        generate_name: Optional[str],
        namespace: Optional[str],
        suspend: bool,
        request_id: Optional[str],
        topology: Optional[str],
        topology_preferred: bool,
        procs_per_node: Optional[int] = None,
    ) -> str:
        _check_order(initializer, trainer)
        _check_trainer(trainer)
        # The options write their parts of the TrainJob manifest, as the Kubeflow SDK's do.
        job: Dict[str, Any] = {}
        for option in options or ():
            if not callable(option):
                raise ValueError(f"options: {option!r} is not an option; take them from kiln.options (Name, Labels, RuntimePatch...)")
            option(job, trainer, self)
        meta, spec_opts = job.get("metadata", {}), job.get("spec", {})
        overrides = spec_opts.get("trainer", {})
        name = _agree("name", name, meta.get("name"))
        active_deadline_seconds = _agree("active_deadline_seconds", active_deadline_seconds, spec_opts.get("activeDeadlineSeconds"))
        labels = {**(meta.get("labels") or {}), **(labels or {})}
        annotations = {**(meta.get("annotations") or {}), **(annotations or {})}
        runtime_patches = list(spec_opts.get("runtimePatches") or [])
        env_from = [e for e in overrides.get("env", []) if "valueFrom" in e]

        if runtime is None:
            runtime = DEFAULT_RUNTIME
        if isinstance(trainer, CustomTrainer):
            from kiln._function import check_func_args, check_function

            # A function that cannot run on the nodes is refused before any call to the server.
            check_function(trainer.func)
            check_func_args(trainer.func, trainer.func_args)
            # The function runs with the runtime's entrypoint (python, torchrun, mpirun): look it up.
            rt = runtime if isinstance(runtime, Runtime) else self.get_runtime(runtime)
            _check_runtime_takes(rt, trainer)
            from kiln._function import trainer_command

            command, args = trainer_command(trainer, rt.trainer.framework if rt.trainer else UNKNOWN)
            container = CustomTrainerContainer(
                image=trainer.image, num_nodes=trainer.num_nodes, resources_per_node=trainer.resources_per_node, env=trainer.env,
                command=list(command), args=list(args), num_procs_per_node=procs_per_node,
            )  # fmt: skip
            runtime = rt
        else:
            if isinstance(runtime, Runtime):
                _check_runtime_takes(runtime, trainer)
            container = copy.copy(trainer) if trainer is not None else CustomTrainerContainer()
        if "command" in overrides:
            container.command = list(overrides["command"])
        if "args" in overrides:
            container.args = list(overrides["args"])

        dataset_uri, dataset_env = initializer_source("dataset", initializer.dataset) if initializer else ("", [])
        model_uri, model_env = initializer_source("model", initializer.model) if initializer else ("", [])
        spec = _train_job_spec(
            runtime,
            container,
            (dataset_uri, model_uri),
            queue=queue,
            priority_class=priority_class,
            active_deadline_seconds=active_deadline_seconds,
            ttl_seconds_after_finished=ttl_seconds_after_finished,
            suspend=suspend,
            topology=topology,
            topology_preferred=topology_preferred,
        )
        if not name and not generate_name:
            generate_name = spec.runtime + "-"
        ns = namespace or self.namespace
        if runtime_patches or env_from or dataset_env or model_env:
            # More than a NewTrainJob says: send the whole TrainJob, as the Kubeflow SDK does.
            if topology:
                raise ValueError(
                    "topology: not taken together with RuntimePatch, TrainerEnvFrom or initializer settings yet; "
                    "place the pods with a RuntimePatch (Kueue's podset-required-topology annotation) instead"
                )
            manifest = _manifest(spec, name, generate_name, labels, annotations, runtime_patches, env_from, dataset_env, model_env)
            req = pb.CreateTrainJobRequest(namespace=ns, manifest=json.dumps(manifest), request_id=request_id or uuid.uuid4().hex)
        else:
            req = pb.CreateTrainJobRequest(
                namespace=ns,
                train_job=pb.NewTrainJob(name=name or "", generate_name=generate_name or "", labels=labels, annotations=annotations, spec=spec),
                request_id=request_id or uuid.uuid4().hex,
            )
        # The request id makes CreateTrainJob safe to retry: the transport retries it while
        # the server is unreachable, as it does the read-only calls.
        resp = self._transport.unary(self.jobs.SERVICE, "CreateTrainJob", req, pb.CreateTrainJobResponse, idempotent=True)
        _warn(resp.warnings, 4)
        return resp.train_job.name if resp.train_job else ""

    # -- read -----------------------------------------------------------------------------

    def list_jobs(
        self,
        runtime: Union[Runtime, str, None] = None,
        namespace: Optional[str] = None,
        *,
        all_namespaces: bool = False,
        label_selector: Optional[str] = None,
        status: Optional[Iterable[str]] = None,
    ) -> List[TrainJob]:
        """The jobs of a namespace (or of all you may list), ordered by namespace and name.

        ``runtime`` (a :class:`Runtime` or its name) keeps the jobs of one runtime, as the
        Kubeflow SDK's ``list_jobs(runtime)``. ``status`` keeps those in one of the given
        :data:`STATUSES`: Kubeflow's ``Created``, ``Running``, ``Complete``, ``Failed``, and
        Kiln's additions ``Queued`` (waiting in a Kueue queue) and ``Suspended`` (stopped by a
        user), which Kubeflow's SDK would call Created. ``label_selector`` and
        ``all_namespaces`` are Kiln's too.
        """
        if self._local is not None:
            if namespace or all_namespaces or label_selector or status is not None:
                raise ValueError("namespace, all_namespaces, label_selector, status: Kiln's API server settings; LocalProcessBackendConfig takes runtime= only")
            return self._local.list_jobs(runtime=runtime)
        want_runtime = runtime.name if isinstance(runtime, Runtime) else runtime
        wanted = _statuses(status) if status is not None else set()
        # The server filters by status word and state; a server older than the words ignores
        # them, and the client keeps exactly the statuses asked for (a state alone does not
        # tell Created from Running).
        states = sorted({_STATE_FOR[s] for s in wanted})
        out: List[TrainJob] = []
        token = ""
        while True:
            resp = self.jobs.list_train_jobs(
                pb.ListTrainJobsRequest(
                    namespace=namespace or self.namespace,
                    all_namespaces=all_namespaces,
                    label_selector=label_selector or "",
                    states=states,
                    page_size=500,
                    page_token=token,
                    statuses=sorted(wanted),
                )
            )
            for j in resp.train_jobs:
                if want_runtime and (j.spec or pb.TrainJobSpec()).runtime != want_runtime:
                    continue
                if wanted and _status_of(j.status or pb.TrainJobStatus()) not in wanted:
                    continue
                out.append(self._job(j))
            token = resp.next_page_token
            if not token:
                return out

    def get_job(self, name: str, namespace: Optional[str] = None) -> TrainJob:
        """One job with its steps (pods) and timers."""
        if self._local is not None:
            return self._local.get_job(name=name)
        resp = self.jobs.get_train_job(pb.GetTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return self._job(resp.train_job or pb.TrainJob())

    def get_job_logs(
        self,
        name: str,
        step: Optional[str] = "node-0",
        follow: bool = False,
        tail: Optional[int] = None,
        *,
        namespace: Optional[str] = None,
        container: Optional[str] = None,
        attempt: Optional[int] = None,
        previous: bool = False,
    ) -> Iterator[str]:
        """The lines a step printed. Steps are named as the Kubeflow SDK names them:
        ``node-0`` (the default), ``node-1``..., ``dataset-initializer``,
        ``model-initializer``, with an MPI job's launcher as ``node-0``; the API server's names
        (``launcher-0``, ``dataset-initializer-0``) work as well. ``step=None`` streams every
        step, each line prefixed with ``[step]`` (the server's name). ``follow`` waits for steps
        that have not started yet and streams new lines until the job finishes; ``tail`` keeps
        the last lines of each step.

        ``attempt`` (from 0) reads the logs Kiln kept of an earlier attempt, ``previous`` those
        of the attempt before the pods of now: the last MiB of each pod that was deleted (a
        group restart, a preemption, a suspension, the deadline), with its last words."""
        if self._local is not None:
            yield from self._local.get_job_logs(name=name, step=step, follow=follow)
            return
        ns = namespace or self.namespace
        kiln_step = step or ""
        if step and _NODE_STEP.match(step):
            kiln_step = _kiln_step_name(step, self._is_mpi_job(name, ns))
        elif step:
            kiln_step = _kiln_step_name(step, False)
        req = pb.StreamLogsRequest(
            namespace=ns,
            name=name,
            step=kiln_step,
            container=container or "",
            follow=follow,
            tail_lines=tail,
            attempt=attempt,
            previous=previous,
        )
        for resp in self.jobs.stream_logs(req):
            for line in resp.lines:
                yield line.text if step else f"[{line.step}] {line.text}"

    def get_job_events(self, name: str, namespace: Optional[str] = None) -> List[Event]:
        """The Kubernetes events of a job and of every object it owns, oldest first, with the
        Kubeflow SDK's fields (``involved_object_kind``, ``involved_object_name``, ``message``,
        ``reason``, ``event_time``) and Kiln's."""
        if self._local is not None:
            return self._local.get_job_events(name=name)
        resp = self.jobs.list_events(pb.ListEventsRequest(namespace=namespace or self.namespace, name=name))
        out = []
        for e in resp.events:
            kind, _, obj = e.object.partition("/")
            out.append(
                Event(
                    involved_object_kind=kind,
                    involved_object_name=obj,
                    message=e.message,
                    reason=e.reason,
                    event_time=e.first_time or e.last_time,
                    type=e.type,
                    object=e.object,
                    count=e.count,
                    first_time=e.first_time,
                    last_time=e.last_time,
                    source=e.source,
                )
            )
        return out

    def get_job_metrics(self, name: str, metrics: Optional[Iterable[str]] = None, *, namespace: Optional[str] = None) -> Dict[str, List[MetricPoint]]:
        """The history of the numeric metrics a job's trainer reported, by name, oldest point
        first: at most 500 points a metric, spread evenly over the whole run, then the latest
        value. ``metrics`` names those wanted (None: all); each one named is in the answer,
        with no points until the trainer reported it."""
        wanted = _names(metrics)
        resp = self.jobs.get_train_job_metrics(pb.GetTrainJobMetricsRequest(namespace=namespace or self.namespace, name=name, metrics=wanted))
        out = _points(resp.series)
        for m in wanted or ():
            out.setdefault(m, [])
        return out

    def watch_job_metrics(self, name: str, metrics: Optional[Iterable[str]] = None, *, namespace: Optional[str] = None) -> Iterator[Dict[str, List[MetricPoint]]]:
        """Stream a job's metrics (those named, or all) by name: first their whole history,
        then the points of each new report as it arrives. It ends when the job has completed
        or failed (or when you leave the loop).

        A stream that drops is opened again (after 0.1 s, doubling up to 5 s while it keeps
        dropping): its history comes again, and only the points newer than those already
        yielded are yielded, so every point comes once.
        """
        req = pb.WatchTrainJobMetricsRequest(namespace=namespace or self.namespace, name=name, metrics=_names(metrics))
        last: Dict[str, datetime] = {}
        started = False
        backoff = 0.1
        while True:
            stream = self.jobs.watch_train_job_metrics(req)
            try:
                for ev in stream:
                    if ev.finished is not None:
                        return
                    got = ev.history or ev.points
                    if got is None:
                        continue  # an event of a newer server
                    fresh = _fresh(_points(got.series), last)
                    if fresh or not started:
                        # The first history comes even when empty: the watch is on.
                        started = True
                        yield fresh
            except errors.UnavailableError:
                pass  # the server restarted or a proxy dropped the stream: open it again
            finally:
                stream.close()
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    def wait_for_job_status(
        self,
        name: str,
        status: Union[str, Iterable[str]] = {TRAINJOB_COMPLETE},
        timeout: float = 600,
        polling_interval: Optional[float] = 2,
        callbacks: Optional[Sequence[Callback]] = None,
        *,
        namespace: Optional[str] = None,
    ) -> TrainJob:
        """Wait until the job reaches one of ``status`` (any of :data:`STATUSES`; Queued and
        Suspended are Kiln's) and return it.

        ``polling_interval`` is the Kubeflow SDK's, and accepted for its sake: there is no
        polling here, the wait follows the server's watch and sees each change as it happens.
        (Callbacks given in its place, as before it was added, are taken as callbacks.)

        Each callback is called with the job on every change seen (its state, steps'
        counts, timers). A job that fails while ``Failed`` is not among ``status`` raises
        :class:`kiln.JobFailedError` (a RuntimeError, as Kubeflow's); a job deleted meanwhile
        raises :class:`kiln.NotFoundError`; ``timeout`` seconds raise :class:`TimeoutError`. The
        wait follows the server's watch and resumes it if the connection drops.
        """
        if self._local is not None:
            return self._local.wait_for_job_status(name=name, status=set(_statuses(status)), timeout=timeout, polling_interval=polling_interval, callbacks=callbacks)
        if polling_interval is not None and not isinstance(polling_interval, (int, float)):
            if callbacks is not None:
                raise TypeError(f"wait_for_job_status(): polling_interval is a number of seconds, got {type(polling_interval).__name__}")
            callbacks, polling_interval = polling_interval, None
        if polling_interval is not None and polling_interval <= 0:
            raise ValueError(f"polling_interval {polling_interval}: want a positive number of seconds")
        wanted = _statuses(status)
        ns = namespace or self.namespace
        deadline = time.monotonic() + timeout
        rv = ""
        backoff = 0.1
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.DeadlineExceededError(f"TrainJob {ns}/{name} did not reach {'/'.join(sorted(wanted))} in {timeout:g}s")
            seen = False
            try:
                stream = self.jobs.watch_train_jobs(
                    pb.WatchTrainJobsRequest(namespace=ns, name=name, resource_version=rv, heartbeat_seconds=int(min(15, max(1, remaining)))),
                    timeout=remaining,
                )
                for ev in stream:
                    if ev.resource_version:
                        rv = ev.resource_version
                    if ev.type == pb.WatchEventType.WATCH_EVENT_TYPE_DELETED:
                        raise errors.NotFoundError(f"TrainJob {ns}/{name} was deleted while waiting for it")
                    if ev.type == pb.WatchEventType.WATCH_EVENT_TYPE_SYNCED and not seen:
                        raise errors.NotFoundError(f'TrainJob "{name}" not found in namespace {ns}')
                    if ev.type in (pb.WatchEventType.WATCH_EVENT_TYPE_ADDED, pb.WatchEventType.WATCH_EVENT_TYPE_MODIFIED) and ev.train_job:
                        seen = True
                        job = self._job(ev.train_job)
                        for cb in callbacks or ():
                            cb(job)
                        if job.status in wanted:
                            stream.close()
                            return job
                        if job.status == "Failed":
                            stream.close()
                            raise errors.JobFailedError(job)
            except errors.DeadlineExceededError:
                if time.monotonic() >= deadline - 0.05:
                    raise errors.DeadlineExceededError(f"TrainJob {ns}/{name} did not reach {'/'.join(sorted(wanted))} in {timeout:g}s") from None
                raise
            except errors.UnavailableError:
                # The server restarted or a proxy dropped the stream: resume from rv.
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, 5.0)

    # -- control --------------------------------------------------------------------------

    def suspend_job(self, name: str, namespace: Optional[str] = None) -> TrainJob:
        """Stop a job's pods and its deadline clock; a queued job leaves Kueue's queue and its quota."""
        resp = self.jobs.suspend_train_job(pb.SuspendTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return TrainJob.from_proto(resp.train_job or pb.TrainJob())

    def resume_job(self, name: str, namespace: Optional[str] = None) -> TrainJob:
        """Undo :meth:`suspend_job`: the job goes back to its queue (or runs again)."""
        resp = self.jobs.resume_train_job(pb.ResumeTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return TrainJob.from_proto(resp.train_job or pb.TrainJob())

    def delete_job(self, name: str, namespace: Optional[str] = None) -> None:
        """Delete a job and everything it owns."""
        if self._local is not None:
            return self._local.delete_job(name=name)
        self.jobs.delete_train_job(pb.DeleteTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return None

    # -- schedules ------------------------------------------------------------------------

    def create_schedule(
        self,
        name: str,
        schedule: str,
        runtime: Union[str, Runtime, None],
        trainer: Optional[CustomTrainerContainer] = None,
        initializer: Optional[Initializer] = None,
        *,
        time_zone: Optional[str] = None,
        concurrency_policy: str = "Allow",
        starting_deadline_seconds: Optional[int] = None,
        successful_jobs_history_limit: Optional[int] = None,
        failed_jobs_history_limit: Optional[int] = None,
        suspend: bool = False,
        queue: Optional[str] = None,
        priority_class: Optional[str] = None,
        active_deadline_seconds: Optional[int] = None,
        ttl_seconds_after_finished: Optional[int] = None,
        labels: Optional[Dict[str, str]] = None,
        annotations: Optional[Dict[str, str]] = None,
        run_labels: Optional[Dict[str, str]] = None,
        namespace: Optional[str] = None,
        request_id: Optional[str] = None,
        topology: Optional[str] = None,
        topology_preferred: bool = False,
    ) -> Schedule:
        """Create a schedule: a CronTrainJob that creates a job, a run, at each time of
        ``schedule``, a cron expression such as ``"0 2 * * 0"`` (Sundays at 02:00) read in
        ``time_zone`` (an IANA name; default UTC).

        ``runtime``, ``trainer``, ``initializer``, ``queue``, ``priority_class``, ``topology``,
        ``active_deadline_seconds`` (the limit of each run) and ``ttl_seconds_after_finished``
        make each run as :meth:`train` makes a job; ``run_labels`` label each run, ``labels``
        and ``annotations`` the schedule itself. ``concurrency_policy`` is ``Allow``,
        ``Forbid`` or ``Replace``; ``suspend`` creates it without runs until
        :meth:`resume_schedule`. The call carries a request id (random unless given):
        retried after a lost answer, it returns the schedule the first attempt created.
        """
        policy = _policy(concurrency_policy)
        spec = _train_job_spec(
            runtime,
            trainer,
            initializer,
            queue=queue,
            priority_class=priority_class,
            active_deadline_seconds=active_deadline_seconds,
            ttl_seconds_after_finished=ttl_seconds_after_finished,
            suspend=False,
            topology=topology,
            topology_preferred=topology_preferred,
        )
        req = pb.CreateCronTrainJobRequest(
            namespace=namespace or self.namespace,
            cron_train_job=pb.NewCronTrainJob(
                name=name,
                labels=dict(labels or {}),
                annotations=dict(annotations or {}),
                spec=pb.CronTrainJobSpec(
                    schedule=schedule,
                    time_zone=time_zone or "",
                    concurrency_policy=policy,
                    starting_deadline_seconds=starting_deadline_seconds,
                    suspend=suspend,
                    successful_jobs_history_limit=successful_jobs_history_limit,
                    failed_jobs_history_limit=failed_jobs_history_limit,
                    train_job=pb.TrainJobTemplate(labels=dict(run_labels or {}), spec=spec),
                ),
            ),
            request_id=request_id or uuid.uuid4().hex,
        )
        # As for CreateTrainJob, the request id makes the call safe to retry.
        resp = self._transport.unary(self.schedules.SERVICE, "CreateCronTrainJob", req, pb.CreateCronTrainJobResponse, idempotent=True)
        _warn(resp.warnings)
        return Schedule.from_proto(resp.cron_train_job or pb.CronTrainJob())

    def list_schedules(
        self,
        namespace: Optional[str] = None,
        *,
        all_namespaces: bool = False,
        label_selector: Optional[str] = None,
    ) -> List[Schedule]:
        """The schedules of a namespace (or of all you may list), ordered by namespace and name."""
        resp = self.schedules.list_cron_train_jobs(
            pb.ListCronTrainJobsRequest(namespace=namespace or self.namespace, all_namespaces=all_namespaces, label_selector=label_selector or "")
        )
        return [Schedule.from_proto(s) for s in resp.cron_train_jobs]

    def get_schedule(self, name: str, namespace: Optional[str] = None) -> Schedule:
        """One schedule, with its active runs and the next time one falls due."""
        resp = self.schedules.get_cron_train_job(pb.GetCronTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return Schedule.from_proto(resp.cron_train_job or pb.CronTrainJob())

    def suspend_schedule(self, name: str, namespace: Optional[str] = None) -> Schedule:
        """Stop new runs; runs already created go on."""
        resp = self.schedules.suspend_cron_train_job(pb.SuspendCronTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return Schedule.from_proto(resp.cron_train_job or pb.CronTrainJob())

    def resume_schedule(self, name: str, namespace: Optional[str] = None) -> Schedule:
        """Undo :meth:`suspend_schedule`. A time missed meanwhile runs once if it is within
        the schedule's starting deadline."""
        resp = self.schedules.resume_cron_train_job(pb.ResumeCronTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return Schedule.from_proto(resp.cron_train_job or pb.CronTrainJob())

    def trigger_schedule(self, name: str, namespace: Optional[str] = None, *, request_id: Optional[str] = None) -> str:
        """Create a run now, outside the schedule, and return its name. The run belongs to the
        schedule (its concurrency policy and history limits count it). The call carries a
        request id (random unless given): a retry finds the run the first attempt created."""
        req = pb.TriggerCronTrainJobRequest(namespace=namespace or self.namespace, name=name, request_id=request_id or uuid.uuid4().hex)
        resp = self._transport.unary(self.schedules.SERVICE, "TriggerCronTrainJob", req, pb.TriggerCronTrainJobResponse, idempotent=True)
        return resp.train_job.name if resp.train_job else ""

    def delete_schedule(self, name: str, namespace: Optional[str] = None, *, keep_runs: bool = False) -> None:
        """Delete a schedule and, unless ``keep_runs``, its runs."""
        self.schedules.delete_cron_train_job(pb.DeleteCronTrainJobRequest(namespace=namespace or self.namespace, name=name, keep_runs=keep_runs))

    def list_schedule_runs(self, name: str, namespace: Optional[str] = None) -> List[TrainJob]:
        """The runs of a schedule, newest first (without their steps)."""
        resp = self.schedules.list_cron_train_job_runs(pb.ListCronTrainJobRunsRequest(namespace=namespace or self.namespace, name=name))
        return [TrainJob.from_proto(j) for j in resp.train_jobs]

    # -- migration ------------------------------------------------------------------------

    def convert_manifests(self, manifests: str, runtime: Optional[str] = None, namespace: Optional[str] = None) -> "pb.ConvertManifestsResponse":
        """Convert PyTorchJobs (kubeflow.org/v1), batch Jobs and CronJobs, and TrainJobs of the
        v2alpha1 draft (YAML or JSON, several documents allowed) into TrainJob and CronTrainJob
        manifests, creating nothing. ``manifests`` of the answer are the results, in order;
        ``warnings`` name each source field that did not carry over (``note`` marks what
        carried over in another form)."""
        return self.jobs.convert_manifests(pb.ConvertManifestsRequest(manifests=manifests, runtime=runtime or "", namespace=namespace or ""))

    # -- runtimes and queues --------------------------------------------------------------

    def list_runtimes(self, namespace: Optional[str] = None) -> List[Runtime]:
        """The runtimes jobs of the namespace can run on, as the Kubeflow SDK lists them: the
        namespace's TrainingRuntimes, then the ClusterTrainingRuntimes that none of them shadows
        (a TrainingRuntime wins over a ClusterTrainingRuntime of the same name)."""
        if self._local is not None:
            return self._local.list_runtimes()
        resp = self.runtimes.list_runtimes(pb.ListRuntimesRequest(namespace=namespace or self.namespace))
        runtimes = [Runtime.from_proto(r) for r in resp.runtimes]
        namespaced = [r for r in runtimes if not r.cluster]
        names = {r.name for r in namespaced}
        return namespaced + [r for r in runtimes if r.cluster and r.name not in names]

    def get_runtime(self, name: str, namespace: Optional[str] = None) -> Runtime:
        """A runtime by name, as the Kubeflow SDK finds it: the TrainingRuntime of the client's
        namespace, else the ClusterTrainingRuntime. With ``namespace`` (Kiln's), the
        TrainingRuntime of that namespace only."""
        if self._local is not None:
            return self._local.get_runtime(name=name)
        if namespace:
            return self._get_runtime(name, pb.RuntimeKind.RUNTIME_KIND_NAMESPACED, namespace)
        try:
            return self._get_runtime(name, pb.RuntimeKind.RUNTIME_KIND_NAMESPACED, self.namespace)
        except (errors.NotFoundError, errors.PermissionDeniedError):
            # None in the namespace, or no right to read the namespace's: the cluster's.
            return self._get_runtime(name, pb.RuntimeKind.RUNTIME_KIND_CLUSTER, "")

    def _get_runtime(self, name: str, kind: pb.RuntimeKind, namespace: str) -> Runtime:
        resp = self.runtimes.get_runtime(pb.GetRuntimeRequest(name=name, namespace=namespace, kind=kind))
        rt = Runtime.from_proto(resp.runtime or pb.Runtime())
        self._runtime_cache[(int(kind), namespace, name)] = (time.monotonic(), rt)
        return rt

    def get_runtime_packages(self, runtime: Union[Runtime, str]) -> None:
        """Print the runtime's Python version and packages (and ``nvidia-smi``'s view of the GPUs
        of one node, if it has GPUs), as the Kubeflow SDK does: it runs a one-node job on the
        runtime, waits for it, prints its logs and deletes it."""
        if self._local is not None:
            return self._local.get_runtime_packages(runtime=runtime)
        rt = runtime if isinstance(runtime, Runtime) else self.get_runtime(runtime)
        if rt.trainer is not None and rt.trainer.trainer_type == TrainerType.BUILTIN_TRAINER:
            raise ValueError("Cannot get Runtime packages for BuiltinTrainer")
        mpi = bool(rt.trainer and rt.trainer.command[:1] == ("mpirun",))
        name = self._train(
            rt, None, CustomTrainer(func=_print_packages, num_nodes=1, resources_per_node=None if rt.trainer and rt.trainer.device == "gpu" else {"cpu": 1}), None,
            queue=None, priority_class=None, active_deadline_seconds=None, ttl_seconds_after_finished=None, labels=None, annotations=None, name=None,
            generate_name=None, namespace=None, suspend=False, request_id=None, topology=None, topology_preferred=False,
            procs_per_node=1 if mpi else None,  # one process, as Kubeflow's mpirun -np 1
        )  # fmt: skip
        self.wait_for_job_status(name)
        print("\n".join(self.get_job_logs(name=name)))
        self.delete_job(name)
        return None

    def list_queues(self, namespace: Optional[str] = None, *, all_namespaces: bool = False) -> List[Queue]:
        """Kueue's LocalQueues of the namespace (or of all you may list)."""
        resp = self.queues.list_queues(pb.ListQueuesRequest(namespace=namespace or self.namespace, all_namespaces=all_namespaces))
        return [
            Queue(name=q.name, namespace=q.namespace, cluster_queue=q.cluster_queue, pending=q.pending, admitted=q.admitted, active=q.active, message=q.message, raw=q)
            for q in resp.queues
        ]

    # -- a job's runtime and steps, as the Kubeflow SDK has them ----------------------------

    def _job(self, j: pb.TrainJob) -> TrainJob:
        """A job the server described, with its runtime looked up (cached for a minute)."""
        spec = j.spec or pb.TrainJobSpec()
        return TrainJob.from_proto(j, self._runtime_of(spec.runtime, spec.runtime_kind, j.namespace))

    def _runtime_of(self, name: str, kind: pb.RuntimeKind, namespace: str) -> Runtime:
        if kind != pb.RuntimeKind.RUNTIME_KIND_NAMESPACED:
            kind, namespace = pb.RuntimeKind.RUNTIME_KIND_CLUSTER, ""
        hit = self._runtime_cache.get((int(kind), namespace, name))
        if hit and time.monotonic() - hit[0] < _RUNTIME_CACHE_SECONDS:
            return hit[1]
        if not name:
            return _named_runtime(name, kind, namespace)
        try:
            return self._get_runtime(name, kind, namespace)
        except errors.KilnError:
            # Deleted since, or not ours to read: the job still names it.
            rt = _named_runtime(name, kind, namespace)
            self._runtime_cache[(int(kind), namespace, name)] = (time.monotonic(), rt)
            return rt

    def _is_mpi_job(self, name: str, namespace: str) -> bool:
        """Whether a job has an MPI launcher (Kubeflow's node-0); False when it cannot be told."""
        try:
            j = self.jobs.get_train_job(pb.GetTrainJobRequest(namespace=namespace, name=name)).train_job or pb.TrainJob()
        except errors.KilnError:
            return False  # the logs call says what is wrong
        if _has_launcher(j):
            return True
        spec = j.spec or pb.TrainJobSpec()
        return spec.runtime != "" and LAUNCHER in self._runtime_of(spec.runtime, spec.runtime_kind, j.namespace).steps


def _print_packages() -> None:
    """What get_runtime_packages runs on the runtime: its Python, its packages, its GPUs."""
    import shutil
    import subprocess
    import sys

    print(f"Python: {sys.version}")
    if shutil.which("pip"):
        print(subprocess.run(["pip", "list"], capture_output=True, text=True).stdout)
    else:
        print("Unable to get installed packages: pip command not found")
    if shutil.which("nvidia-smi"):
        print("Available GPUs on the single training node")
        print(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)


def _train_job_spec(
    runtime: Union[str, Runtime, None],
    trainer: Optional[CustomTrainerContainer],
    initializer: Union[Initializer, Tuple[str, str], None],
    *,
    queue: Optional[str],
    priority_class: Optional[str],
    active_deadline_seconds: Optional[int],
    ttl_seconds_after_finished: Optional[int],
    suspend: bool,
    topology: Optional[str] = None,
    topology_preferred: bool = False,
) -> pb.TrainJobSpec:
    """The spec of a job, as :meth:`TrainerClient.train` submits it and as each run of a
    schedule is created from it. ``initializer`` is an :class:`Initializer` or the dataset and
    model URIs."""
    if runtime is None:
        raise ValueError("runtime: name the runtime to train on, e.g. runtime='torch-distributed' (see list_runtimes())")
    rt_kind = pb.RuntimeKind.RUNTIME_KIND_UNSPECIFIED
    if isinstance(runtime, Runtime):
        if not runtime.cluster:
            rt_kind = pb.RuntimeKind.RUNTIME_KIND_NAMESPACED
        runtime = runtime.name
    if topology_preferred and not topology:
        raise ValueError("topology_preferred: name the level with topology=, e.g. topology='rack'")
    if isinstance(initializer, tuple):
        dataset_uri, model_uri = initializer
    else:
        dataset_uri, model_uri = _uris(initializer)
    if isinstance(trainer, (CustomTrainer, BuiltinTrainer)):
        raise ValueError(f"trainer: a schedule's runs take a CustomTrainerContainer (an image and its command), not a {type(trainer).__name__}")
    t = trainer or CustomTrainerContainer()
    resources = None
    if t.resources_per_node:
        # Resource names as the Kubeflow SDK spells them: gpu, storage, mig-1g.5gb, CPU...
        quantities = {k: _quantity(k, v) for k, v in normalize_resources(t.resources_per_node).items()}
        resources = pb.Resources(requests=dict(quantities), limits=dict(quantities))
    return pb.TrainJobSpec(
        runtime=runtime,
        runtime_kind=rt_kind,
        image=t.image or "",
        command=list(getattr(t, "command", None) or []),
        args=list(getattr(t, "args", None) or []),
        env=[pb.EnvVar(name=k, value=str(v)) for k, v in (t.env or {}).items()],
        nodes=_count("trainer.num_nodes", t.num_nodes),
        procs_per_node=_count("trainer.num_procs_per_node", getattr(t, "num_procs_per_node", None)),
        resources_per_node=resources,
        dataset_uri=dataset_uri,
        model_uri=model_uri,
        queue=queue or "",
        priority_class=priority_class or "",
        suspend=suspend,
        active_deadline_seconds=active_deadline_seconds,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        topology=pb.TopologyRequest(level=topology, preferred=topology_preferred) if topology else None,
    )


def _uris(initializer: Optional[Initializer]) -> Tuple[str, str]:
    """The URIs of a schedule's initializer. A schedule's runs carry no initializer settings:
    one set away from its default (an access token, say) is refused, never dropped."""
    if initializer is None:
        return "", ""
    out = []
    for what in ("dataset", "model"):
        v = getattr(initializer, what)
        uri, _ = initializer_source(what, v)
        if not isinstance(v, str) and v is not None and hasattr(v, "__dataclass_fields__"):
            changed = [
                f.name
                for f in fields(v)
                if f.name != "storage_uri" and getattr(v, f.name) != (f.default_factory() if callable(f.default_factory) else f.default)  # type: ignore[misc]
            ]
            if changed:
                raise ValueError(f"initializer.{what}: {', '.join(changed)}: a schedule's runs take the storage URI only; submit with train() for these settings")
        out.append(uri)
    return out[0], out[1]


def _manifest(
    spec: pb.TrainJobSpec,
    name: Optional[str],
    generate_name: Optional[str],
    labels: Dict[str, str],
    annotations: Dict[str, str],
    runtime_patches: List[Dict[str, Any]],
    env_from: List[Dict[str, Any]],
    dataset_env: List[Dict[str, str]],
    model_env: List[Dict[str, str]],
) -> Dict[str, Any]:
    """The TrainJob (``trainer.kubeflow.org/v1alpha1``, the API's field names) that ``spec`` and
    the rest describe: what the API server would build from a NewTrainJob, plus what only a
    manifest says (runtime patches, variables from Secrets, the initializers' settings)."""
    labels = dict(labels)
    if spec.queue:
        labels["kueue.x-k8s.io/queue-name"] = spec.queue
    if spec.priority_class:
        labels["kueue.x-k8s.io/priority-class"] = spec.priority_class
    meta: Dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = dict(annotations)
    kind = RuntimeKind.TRAINING_RUNTIME if spec.runtime_kind == pb.RuntimeKind.RUNTIME_KIND_NAMESPACED else RuntimeKind.CLUSTER_TRAINING_RUNTIME
    body: Dict[str, Any] = {"runtimeRef": {"name": spec.runtime, "apiGroup": "trainer.kubeflow.org", "kind": kind.value}}
    trainer: Dict[str, Any] = {}
    if spec.image:
        trainer["image"] = spec.image
    if spec.command:
        trainer["command"] = list(spec.command)
    if spec.args:
        trainer["args"] = list(spec.args)
    env = [{"name": e.name, "value": e.value} for e in spec.env] + list(env_from)
    if env:
        trainer["env"] = env
    if spec.nodes:
        trainer["numNodes"] = spec.nodes
    if spec.procs_per_node:
        trainer["numProcPerNode"] = spec.procs_per_node
    if spec.resources_per_node:
        trainer["resourcesPerNode"] = {"requests": dict(spec.resources_per_node.requests), "limits": dict(spec.resources_per_node.limits)}
    if trainer:
        body["trainer"] = trainer
    initializer: Dict[str, Any] = {}
    for what, uri, init_env in (("dataset", spec.dataset_uri, dataset_env), ("model", spec.model_uri, model_env)):
        if uri:
            initializer[what] = {"storageUri": uri, **({"env": init_env} if init_env else {})}
    if initializer:
        body["initializer"] = initializer
    if runtime_patches:
        body["runtimePatches"] = runtime_patches
    if spec.suspend:
        body["suspend"] = True
    if spec.active_deadline_seconds is not None:
        body["activeDeadlineSeconds"] = spec.active_deadline_seconds
    if spec.ttl_seconds_after_finished is not None:
        body["ttlSecondsAfterFinished"] = spec.ttl_seconds_after_finished
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta, "spec": body}


def _check_trainer(trainer: Any) -> None:
    """Refuses what Kiln cannot run, naming it: Kubeflow's BuiltinTrainer, or no trainer at all."""
    if trainer is None or isinstance(trainer, (CustomTrainer, CustomTrainerContainer)):
        return
    if isinstance(trainer, BuiltinTrainer) or type(trainer).__name__ == "BuiltinTrainer":
        raise ValueError(
            "BuiltinTrainer: Kiln has no built-in trainer yet (Kubeflow's TorchTune post-training); "
            "train with a CustomTrainer (a Python function) or a CustomTrainerContainer (an image and its command)"
        )
    raise ValueError(f"The trainer type {type(trainer)} is not supported. Please use CustomTrainer or CustomTrainerContainer.")


def _check_runtime_takes(runtime: Runtime, trainer: Any) -> None:
    """A runtime for Kubeflow's BuiltinTrainer (TorchTune) takes no custom trainer, as in its SDK."""
    if trainer is not None and runtime.trainer is not None and runtime.trainer.trainer_type == TrainerType.BUILTIN_TRAINER:
        raise ValueError(f"{type(trainer).__name__} can't be used with {runtime.name} runtime: it is for a BuiltinTrainer, which Kiln does not have")


def _agree(what: str, keyword: Any, option: Any) -> Any:
    """A value both a keyword of train() and an option set must be the same."""
    if keyword is not None and option is not None and keyword != option:
        raise ValueError(f"{what}: train() says {keyword!r} and an option says {option!r}; give one")
    return keyword if keyword is not None else option


def _names(metrics: Optional[Iterable[str]]) -> List[str]:
    if isinstance(metrics, str):
        return [metrics]
    return list(metrics or [])


def _points(series: Iterable[pb.MetricSeries]) -> Dict[str, List[MetricPoint]]:
    """The series' points by metric name, as they came."""
    out: Dict[str, List[MetricPoint]] = {}
    for s in series:
        out.setdefault(s.name, []).extend(MetricPoint(time=p.time, step=p.step, value=p.value) for p in s.points)
    return out


def _fresh(points: Dict[str, List[MetricPoint]], last: Dict[str, datetime]) -> Dict[str, List[MetricPoint]]:
    """The points newer than the newest of their metric in ``last``, which moves on."""
    out: Dict[str, List[MetricPoint]] = {}
    for name, ps in points.items():
        for p in ps:
            seen = last.get(name)
            if p.time is not None and seen is not None and p.time <= seen:
                continue
            out.setdefault(name, []).append(p)
            if p.time is not None:
                last[name] = p.time
    return out


def _policy(policy: str) -> pb.ConcurrencyPolicy:
    p = _POLICY_NAMED.get(policy.lower()) if isinstance(policy, str) else None
    if p is None:
        raise ValueError(f"concurrency_policy {policy!r}: want one of {', '.join(_POLICIES)} (in any case)")
    return p


def _statuses(status: Union[str, Iterable[str], None]) -> Set[str]:
    if status is None:
        return set()
    items = {status} if isinstance(status, str) else set(status)
    bad = sorted(s for s in items if s not in STATUSES)
    if bad:
        raise ValueError(f"status {', '.join(bad)}: want one of {', '.join(STATUSES)}")
    if not items:
        raise ValueError(f"status: name at least one of {', '.join(STATUSES)}")
    return items


def _count(what: str, n: Optional[int]) -> int:
    if n is None:
        return 0
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what}: want a whole number of at least 1, got {n!r} (leave it unset for the runtime's)")
    return n


def _quantity(resource: str, v: Union[str, int, float]) -> str:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ValueError(f"trainer.resources_per_node[{resource!r}]: want a quantity such as 4, '500m' or '16Gi', got {v!r}")
    return str(v)




def _warn(texts: Sequence[str], stacklevel: int = 3) -> None:
    """Warns of what the server warned of, as the caller's warning (stacklevel 3: the line that
    called create_schedule; train passes 4, for its _train)."""
    for text in texts:
        warnings.warn(text, errors.KilnWarning, stacklevel=stacklevel)


def _check_order(initializer: object, trainer: object) -> None:
    """Refuses a trainer where the initializer goes (this SDK's order before it took the
    Kubeflow SDK's: runtime, initializer, trainer), rather than swapping them silently."""
    if initializer is not None and not isinstance(initializer, Initializer) and not hasattr(initializer, "dataset"):
        raise TypeError(
            f"train(): the second argument is the initializer (the Kubeflow SDK's order: runtime, initializer, trainer), "
            f"got a {type(initializer).__name__}: pass it as trainer=..."
        )
    if trainer is not None and isinstance(trainer, Initializer):
        raise TypeError("train(): trainer is an Initializer: pass it as initializer=... (order: runtime, initializer, trainer)")
