"""TrainerClient: submit, follow and control training jobs, shaped like the Kubeflow SDK's.

A job submitted here is a ``trainer.kubeflow.org/v1alpha1`` TrainJob: kubectl, the ``kiln``
CLI and the Kubeflow SDK see the same object. A schedule is a ``kiln.dev/v1alpha1``
CronTrainJob that creates such a TrainJob, a run, at each scheduled time. Every call goes
through the Kiln API server, which acts as you in Kubernetes, so Kubernetes RBAC decides what
you may see and do.
"""

from __future__ import annotations

import time
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Union

from kiln import config as _config
from kiln import errors
from kiln._connect import Transport
from kiln._gen import kiln_v1 as pb

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

#: The runtime a job runs on when train() names none, as in the Kubeflow SDK.
DEFAULT_RUNTIME = "torch-distributed"

#: The statuses a job reports, in the Kubeflow SDK's words (Queued and Suspended are Kiln's:
#: a job waiting in Kueue is Queued, not Created).
STATUSES = ("Created", "Queued", "Running", "Suspended", "Complete", "Failed")

_STATUS_OF = {
    pb.State.STATE_UNSPECIFIED: "Created",
    pb.State.STATE_QUEUED: "Queued",
    pb.State.STATE_SUSPENDED: "Suspended",
    pb.State.STATE_RUNNING: "Running",
    pb.State.STATE_COMPLETE: "Complete",
    pb.State.STATE_FAILED: "Failed",
}
_STATE_OF = {v: k for k, v in _STATUS_OF.items()}

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


@dataclass
class CustomTrainerContainer:
    """The training container of a job: what runs on each node. Unset fields take the runtime's.

    ``resources_per_node`` maps resource names to quantities, e.g.
    ``{"cpu": 4, "memory": "16Gi", "nvidia.com/gpu": 8}``; ``env`` maps names to values.
    """

    image: Optional[str] = None
    command: Optional[Sequence[str]] = None
    args: Optional[Sequence[str]] = None
    num_nodes: Optional[int] = None
    resources_per_node: Optional[Dict[str, Union[str, int, float]]] = None
    env: Optional[Dict[str, str]] = None
    num_procs_per_node: Optional[int] = None


@dataclass
class Initializer:
    """What the runtime's initializers download before training: a dataset and a model URI,
    e.g. ``hf://tatsu-lab/alpaca``, or objects with a ``storage_uri`` (the Kubeflow SDK's
    ``HuggingFaceDatasetInitializer(storage_uri=...)`` and the like)."""

    dataset: Optional[Union[str, "_HasStorageURI"]] = None
    model: Optional[Union[str, "_HasStorageURI"]] = None


class _HasStorageURI:
    storage_uri: str


def _uri(what: str, v: object) -> str:
    """An initializer's URI: a string, or the ``storage_uri`` of an initializer object."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    uri = getattr(v, "storage_uri", None)
    if not isinstance(uri, str):
        raise TypeError(f"initializer.{what}: want a URI string or an object with storage_uri, got {type(v).__name__}")
    return uri


@dataclass
class Step:
    """One pod of a job: a training node (``node-0``), a launcher or an initializer."""

    name: str
    status: str
    pod: str = ""
    node: str = ""
    devices: Dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    exit_code: Optional[int] = None
    reason: str = ""
    message: str = ""

    # The Kubeflow SDK's names for the same facts.
    @property
    def pod_name(self) -> str:
        """The pod's name (Kubeflow SDK's name for :attr:`pod`)."""
        return self.pod

    @property
    def device(self) -> str:
        """The kind of device the step runs on, as the Kubeflow SDK says it: ``gpu``, ``tpu``
        (from the device resource's name) or ``cpu``."""
        for resource in sorted(self.devices):
            short = resource.rsplit("/", 1)[-1]
            return "gpu" if "gpu" in short else ("tpu" if "tpu" in short else short)
        return "cpu"

    @property
    def device_count(self) -> str:
        """How many devices the step has, as a string (the Kubeflow SDK's), ``Unknown`` for none."""
        return str(sum(self.devices.values())) if self.devices else "Unknown"


class RuntimeRef(str):
    """A job's runtime: its name, a string as ever, with the Kubeflow SDK's ``.name`` (there a
    job's runtime is a Runtime object), so ``job.runtime.name`` works in code written for it."""

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
    """A job and what happens to it. ``status`` is one of :data:`STATUSES`."""

    name: str
    namespace: str
    #: the runtime's name (a str with ``.name``, as the Kubeflow SDK's Runtime has).
    runtime: RuntimeRef
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
    def from_proto(cls, j: pb.TrainJob) -> "TrainJob":
        spec, st = j.spec or pb.TrainJobSpec(), j.status or pb.TrainJobStatus()
        q = st.queue or pb.QueuePosition()
        return cls(
            name=j.name,
            namespace=j.namespace,
            runtime=RuntimeRef(spec.runtime),
            status=_STATUS_OF.get(st.state, "Created"),
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
            steps=[
                Step(
                    name=s.name,
                    status=s.phase,
                    pod=s.pod,
                    node=s.node,
                    devices={d.resource: d.count for d in s.devices},
                    restarts=s.restarts,
                    exit_code=s.exit_code,
                    reason=s.reason,
                    message=s.message,
                )
                for s in st.steps
            ],
            restarts=(st.restarts or pb.Restarts()).count,
            restarts_counted=(st.restarts or pb.Restarts()).counted_towards_max,
            progress=Progress.from_proto(st.progress) if st.progress else None,
            metrics={m.name: m.value for m in (st.progress or pb.Progress()).metrics},
            raw=j,
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
class Runtime:
    """A training runtime: the blueprint a job runs on."""

    name: str
    namespace: str
    framework: str
    image: str
    num_nodes: int
    cluster: bool
    deprecated: bool
    steps: List[str]
    #: the admin's default deadline and TTL for jobs on this runtime.
    active_deadline_seconds: Optional[int] = None
    ttl_seconds_after_finished: Optional[int] = None
    raw: Optional[pb.Runtime] = field(default=None, repr=False)

    @property
    def trainer(self) -> "RuntimeTrainer":
        """The runtime's trainer as the Kubeflow SDK describes it (``runtime.trainer.framework``,
        ``.num_nodes``, ``.device``, ``.device_count``)."""
        devices = {d.resource: d.count for d in (self.raw.devices_per_node if self.raw else [])}
        step = Step(name="node-0", status="", devices=devices)
        return RuntimeTrainer(framework=self.framework, image=self.image, num_nodes=self.num_nodes, device=step.device, device_count=step.device_count)

    @classmethod
    def from_proto(cls, r: pb.Runtime) -> "Runtime":
        rp = r.run_policy or pb.RunPolicy()
        return cls(
            name=r.name,
            namespace=r.namespace,
            framework=r.framework,
            image=r.image,
            num_nodes=r.nodes,
            cluster=r.kind != pb.RuntimeKind.RUNTIME_KIND_NAMESPACED,
            deprecated=r.deprecated,
            steps=list(r.steps),
            active_deadline_seconds=rp.active_deadline_seconds,
            ttl_seconds_after_finished=rp.ttl_seconds_after_finished,
            raw=r,
        )


@dataclass
class RuntimeTrainer:
    """A runtime's trainer, in the Kubeflow SDK's shape (:attr:`Runtime.trainer`)."""

    framework: str
    image: str
    num_nodes: int
    device: str
    device_count: str


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


@dataclass
class Event:
    """A Kubernetes event about a job or an object it owns (``object`` is ``Kind/name``)."""

    type: str
    reason: str
    message: str
    object: str
    count: int
    first_time: Optional[datetime]
    last_time: Optional[datetime]
    source: str


Callback = Callable[[TrainJob], None]


class TrainerClient:
    """The client of one Kiln API server.

    With no arguments it reads the Kiln configuration as the ``kiln`` CLI does (the file
    ``make up`` writes, and ``KILN_*`` variables); ``server``, ``token``, ``token_file``,
    ``ca_file`` and ``namespace`` override it, and ``server`` alone needs no file.
    """

    def __init__(
        self,
        server: Optional[str] = None,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        ca_file: Optional[str] = None,
        namespace: Optional[str] = None,
        context: Optional[str] = None,
        config_file: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        if server:
            try:
                ctx = _config.resolve(config_file, context)
            except _config.ConfigError:
                ctx = _config.Context()
            ctx.server = server
        else:
            ctx = _config.resolve(config_file, context)
        if token is not None:
            ctx.token, ctx.token_file = token, ""
        if token_file is not None:
            ctx.token, ctx.token_file = "", token_file
        if ca_file is not None:
            ctx.certificate_authority = ca_file
        self.namespace = namespace or ctx.namespace or "default"
        self.server = ctx.server
        self._transport = Transport(
            ctx.server,
            token=ctx.token or None,
            token_file=ctx.token_file or None,
            ca_file=ctx.certificate_authority or None,
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
        trainer: Optional[CustomTrainerContainer] = None,
        options: Optional[Sequence[object]] = None,
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

        ``runtime`` names a ClusterTrainingRuntime (or is a :class:`Runtime` from
        :meth:`list_runtimes`); without one, ``torch-distributed``, as in the Kubeflow SDK,
        whose argument order (runtime, initializer, trainer) this follows; a trainer passed
        where the initializer goes is refused, never swapped. Without ``name`` the server picks one from
        ``generate_name`` (default: the runtime's name and a dash). The call carries a
        request id (random unless given): retried after a lost answer, it returns the job
        the first attempt created instead of creating a second one.

        ``topology`` places all training nodes in one domain of a level of the queue's Kueue
        Topology, e.g. ``"rack"`` or ``"block"`` (or a node label): the job waits until one has
        room, or, with ``topology_preferred=True``, is spread when none has.
        """
        _check_order(initializer, trainer)
        if options:
            raise ValueError(
                "options: the Kubeflow SDK's backend options are not taken here; say the same with train()'s keywords: "
                "labels=, annotations=, queue=, priority_class=, name=, namespace="
            )
        spec = _train_job_spec(
            DEFAULT_RUNTIME if runtime is None else runtime,
            trainer,
            initializer,
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
        req = pb.CreateTrainJobRequest(
            namespace=namespace or self.namespace,
            train_job=pb.NewTrainJob(
                name=name or "", generate_name=generate_name or "", labels=dict(labels or {}), annotations=dict(annotations or {}), spec=spec
            ),
            request_id=request_id or uuid.uuid4().hex,
        )
        # The request id makes CreateTrainJob safe to retry: the transport retries it while
        # the server is unreachable, as it does the read-only calls.
        resp = self._transport.unary(self.jobs.SERVICE, "CreateTrainJob", req, pb.CreateTrainJobResponse, idempotent=True)
        _warn(resp.warnings)
        return resp.train_job.name if resp.train_job else ""

    # -- read -----------------------------------------------------------------------------

    def list_jobs(
        self,
        namespace: Optional[str] = None,
        *,
        all_namespaces: bool = False,
        label_selector: Optional[str] = None,
        status: Optional[Iterable[str]] = None,
        runtime: Union[str, Runtime, None] = None,
    ) -> List[TrainJob]:
        """The jobs of a namespace (or of all you may list), ordered by namespace and name;
        ``runtime`` keeps those of one runtime, as the Kubeflow SDK's ``list_jobs(runtime=)``."""
        want_runtime = runtime.name if isinstance(runtime, Runtime) else runtime
        states = [_STATE_OF[s] for s in _statuses(status)] if status is not None else []
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
                )
            )
            out.extend(j for j in (TrainJob.from_proto(j) for j in resp.train_jobs) if not want_runtime or j.runtime == want_runtime)
            token = resp.next_page_token
            if not token:
                return out

    def get_job(self, name: str, namespace: Optional[str] = None) -> TrainJob:
        """One job with its steps (pods) and timers."""
        resp = self.jobs.get_train_job(pb.GetTrainJobRequest(namespace=namespace or self.namespace, name=name))
        return TrainJob.from_proto(resp.train_job or pb.TrainJob())

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
        """The lines a step printed, e.g. ``node-0`` (the default) or
        ``dataset-initializer-0``; ``step=None`` streams every step, each line prefixed
        with ``[step]``. ``follow`` waits for steps that have not started yet and streams
        new lines until the job finishes; ``tail`` keeps the last lines of each step.

        ``attempt`` (from 0) reads the logs Kiln kept of an earlier attempt, ``previous`` those
        of the attempt before the pods of now: the last MiB of each pod that was deleted (a
        group restart, a preemption, a suspension, the deadline), with its last words."""
        req = pb.StreamLogsRequest(
            namespace=namespace or self.namespace,
            name=name,
            step=step or "",
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
        """The Kubernetes events of a job and of every object it owns, oldest first."""
        resp = self.jobs.list_events(pb.ListEventsRequest(namespace=namespace or self.namespace, name=name))
        return [
            Event(type=e.type, reason=e.reason, message=e.message, object=e.object, count=e.count, first_time=e.first_time, last_time=e.last_time, source=e.source)
            for e in resp.events
        ]

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
        status: Union[str, Iterable[str]] = ("Complete",),
        timeout: float = 600,
        polling_interval: Optional[float] = None,
        callbacks: Optional[Sequence[Callback]] = None,
        *,
        namespace: Optional[str] = None,
    ) -> TrainJob:
        """Wait until the job reaches one of ``status`` and return it.

        ``polling_interval`` is the Kubeflow SDK's, and accepted for its sake: there is no
        polling here, the wait follows the server's watch and sees each change as it happens.
        (Callbacks given in its place, as before it was added, are taken as callbacks.)

        Each callback is called with the job on every change seen (its state, steps'
        counts, timers). A job that fails while ``Failed`` is not among ``status`` raises
        :class:`kiln.JobFailedError`; a job deleted meanwhile raises
        :class:`kiln.NotFoundError`; ``timeout`` seconds raise :class:`TimeoutError`. The
        wait follows the server's watch and resumes it if the connection drops.
        """
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
                        job = TrainJob.from_proto(ev.train_job)
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
        self.jobs.delete_train_job(pb.DeleteTrainJobRequest(namespace=namespace or self.namespace, name=name))

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
        """The cluster's runtimes, then the TrainingRuntimes of the namespace."""
        resp = self.runtimes.list_runtimes(pb.ListRuntimesRequest(namespace=namespace or self.namespace))
        return [Runtime.from_proto(r) for r in resp.runtimes]

    def get_runtime(self, name: str, namespace: Optional[str] = None) -> Runtime:
        """A ClusterTrainingRuntime, or with ``namespace`` a TrainingRuntime of that namespace."""
        kind = pb.RuntimeKind.RUNTIME_KIND_NAMESPACED if namespace else pb.RuntimeKind.RUNTIME_KIND_CLUSTER
        resp = self.runtimes.get_runtime(pb.GetRuntimeRequest(name=name, namespace=namespace or "", kind=kind))
        return Runtime.from_proto(resp.runtime or pb.Runtime())

    def list_queues(self, namespace: Optional[str] = None, *, all_namespaces: bool = False) -> List[Queue]:
        """Kueue's LocalQueues of the namespace (or of all you may list)."""
        resp = self.queues.list_queues(pb.ListQueuesRequest(namespace=namespace or self.namespace, all_namespaces=all_namespaces))
        return [
            Queue(name=q.name, namespace=q.namespace, cluster_queue=q.cluster_queue, pending=q.pending, admitted=q.admitted, active=q.active, message=q.message, raw=q)
            for q in resp.queues
        ]


def _train_job_spec(
    runtime: Union[str, Runtime, None],
    trainer: Optional[CustomTrainerContainer],
    initializer: Optional[Initializer],
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
    schedule is created from it."""
    if runtime is None:
        raise ValueError("runtime: name the runtime to train on, e.g. runtime='torch-distributed' (see list_runtimes())")
    rt_kind = pb.RuntimeKind.RUNTIME_KIND_UNSPECIFIED
    if isinstance(runtime, Runtime):
        if not runtime.cluster:
            rt_kind = pb.RuntimeKind.RUNTIME_KIND_NAMESPACED
        runtime = runtime.name
    if topology_preferred and not topology:
        raise ValueError("topology_preferred: name the level with topology=, e.g. topology='rack'")
    t = trainer or CustomTrainerContainer()
    resources = None
    if t.resources_per_node:
        resources = pb.Resources(
            requests={k: _quantity(k, v) for k, v in t.resources_per_node.items()},
            limits={k: _quantity(k, v) for k, v in t.resources_per_node.items()},
        )
    return pb.TrainJobSpec(
        runtime=runtime,
        runtime_kind=rt_kind,
        image=t.image or "",
        command=list(t.command or []),
        args=list(t.args or []),
        env=[pb.EnvVar(name=k, value=str(v)) for k, v in (t.env or {}).items()],
        nodes=_count("trainer.num_nodes", t.num_nodes),
        procs_per_node=_count("trainer.num_procs_per_node", t.num_procs_per_node),
        resources_per_node=resources,
        dataset_uri=_uri("dataset", initializer.dataset) if initializer else "",
        model_uri=_uri("model", initializer.model) if initializer else "",
        queue=queue or "",
        priority_class=priority_class or "",
        suspend=suspend,
        active_deadline_seconds=active_deadline_seconds,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        topology=pb.TopologyRequest(level=topology, preferred=topology_preferred) if topology else None,
    )


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


def _warn(texts: Sequence[str]) -> None:
    """Warns of what the server warned of, as the caller's warning (stacklevel 3: the line that
    called train or create_schedule)."""
    for text in texts:
        warnings.warn(text, errors.KilnWarning, stacklevel=3)


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
