// TrainerClient: submit, follow and control training jobs through the Kiln API server,
// with the verbs of the Python and Go SDKs (shaped like the Kubeflow SDK's TrainerClient),
// and schedules (CronTrainJobs) that create a job, a run, at each scheduled time.

// This module runs in Node.js and in browsers: it imports nothing of either. How options
// become a transport is the environment's (setConnector): ./node.js reads the Kiln
// configuration; in a browser the caller passes a transport (./browser.js makes one).

import { createClient, type CallOptions, type Client, type Transport } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

import { ConfigError, DeadlineExceededError, KilnError, NotFoundError, toKilnError } from "./errors.js";
import { QueueService, type Queue } from "./gen/kiln/v1/queue_pb.js";
import { RuntimeService, type Runtime } from "./gen/kiln/v1/runtime_pb.js";
import { ConcurrencyPolicy as Policy, CronTrainJobService, type CronTrainJob } from "./gen/kiln/v1/crontrainjob_pb.js";
import { ServerService } from "./gen/kiln/v1/server_pb.js";
import {
  RuntimeKind,
  State,
  TrainJobService,
  WatchEventType,
  type ConvertManifestsResponse,
  type Event,
  type MetricSeries,
  type Progress as ProgressMessage,
  type TrainJob as TrainJobMessage,
  type TrainJobSpecSchema,
} from "./gen/kiln/v1/trainjob_pb.js";

/** What a job is doing, in the Kubeflow SDK's words (Queued and Suspended are Kiln's). */
export type Status = "Created" | "Queued" | "Running" | "Suspended" | "Complete" | "Failed";

export const STATUSES: readonly Status[] = ["Created", "Queued", "Running", "Suspended", "Complete", "Failed"];

/** A server older than TrainJobStatus.status says only the state: its status is that. */
const statusOfState: Partial<Record<State, Status>> = {
  [State.QUEUED]: "Queued",
  [State.SUSPENDED]: "Suspended",
  [State.RUNNING]: "Running",
  [State.COMPLETE]: "Complete",
  [State.FAILED]: "Failed",
};

function checkStatus(s: string): Status {
  if ((STATUSES as readonly string[]).includes(s)) return s as Status;
  throw new TypeError(`status ${s}: want one of ${STATUSES.join(", ")}`);
}

/** What a schedule does when a run falls due while an earlier one is active, with CronJob's meaning. */
export type ConcurrencyPolicy = "Allow" | "Forbid" | "Replace";

// The API's unset policy means Allow.
const policyOf: Record<Policy, ConcurrencyPolicy> = {
  [Policy.UNSPECIFIED]: "Allow",
  [Policy.ALLOW]: "Allow",
  [Policy.FORBID]: "Forbid",
  [Policy.REPLACE]: "Replace",
};

const policyNamed = new Map<string, Policy>([
  ["allow", Policy.ALLOW],
  ["forbid", Policy.FORBID],
  ["replace", Policy.REPLACE],
]);

function policy(p: string): Policy {
  const v = typeof p === "string" ? policyNamed.get(p.toLowerCase()) : undefined;
  if (v === undefined) throw new TypeError(`concurrencyPolicy ${String(p)}: want one of Allow, Forbid, Replace (in any case)`);
  return v;
}

/** The training container of a job: what runs on each node. Unset fields take the runtime's. */
export interface CustomTrainerContainer {
  image?: string;
  command?: string[];
  args?: string[];
  numNodes?: number;
  /** Quantities by resource name, e.g. { "nvidia.com/gpu": 8, memory: "16Gi" }. */
  resourcesPerNode?: Record<string, string | number>;
  env?: Record<string, string>;
  numProcsPerNode?: number;
}

/** What the runtime's initializers download before training (URIs, e.g. hf://tatsu-lab/alpaca). */
export interface Initializer {
  dataset?: string;
  model?: string;
}

export interface TrainOptions {
  /** A ClusterTrainingRuntime's name (or a Runtime from listRuntimes()). */
  runtime: string | RuntimeInfo;
  trainer?: CustomTrainerContainer;
  initializer?: Initializer;
  /** The Kueue LocalQueue and WorkloadPriorityClass. */
  queue?: string;
  priorityClass?: string;
  /**
   * Place all training nodes in one domain of this level of the queue's Kueue Topology, e.g.
   * "rack" or "block" (or a node label): the job waits until one has room, or, with
   * topologyPreferred, is spread when none has.
   */
  topology?: string;
  topologyPreferred?: boolean;
  /** Fail the job after that long running (restarted on every resume and Kueue admission). */
  activeDeadlineSeconds?: number;
  /** Delete the job that long after it finished. */
  ttlSecondsAfterFinished?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** The job's name, or a prefix for the server to complete (default: the runtime's name and a dash). */
  name?: string;
  generateName?: string;
  namespace?: string;
  suspend?: boolean;
  /** Makes retries safe (random by default): a retry returns the job the first attempt created. */
  requestId?: string;
}

/** A schedule to create: a CronTrainJob that creates a job, a run, at each scheduled time. */
export interface ScheduleOptions {
  name: string;
  /** A cron expression, e.g. "0 2 * * 0" (Sundays at 02:00), or @daily etc. */
  schedule: string;
  /** Each run's runtime, container and initializers, as for train(). */
  runtime: string | RuntimeInfo;
  trainer?: CustomTrainerContainer;
  initializer?: Initializer;
  /** The IANA time zone the schedule is read in, e.g. "Europe/Berlin" (default UTC). */
  timeZone?: string;
  /** Allow (the default), Forbid or Replace, in any case. */
  concurrencyPolicy?: ConcurrencyPolicy | Lowercase<ConcurrencyPolicy> | Uppercase<ConcurrencyPolicy>;
  /** Skip a run that could not start that long after its scheduled time. */
  startingDeadlineSeconds?: number;
  /** How many completed and failed runs to keep (unset: the server's 3 and 1). */
  successfulJobsHistoryLimit?: number;
  failedJobsHistoryLimit?: number;
  /** Create the schedule without runs until resumeSchedule(). */
  suspend?: boolean;
  /** Each run's Kueue LocalQueue and WorkloadPriorityClass. */
  queue?: string;
  priorityClass?: string;
  /** Each run's topology, as train() takes it. */
  topology?: string;
  topologyPreferred?: boolean;
  /** Fail each run after that long running; delete it that long after it finished. */
  activeDeadlineSeconds?: number;
  ttlSecondsAfterFinished?: number;
  /** The schedule's own labels and annotations. */
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** The labels of each run. */
  runLabels?: Record<string, string>;
  namespace?: string;
  /** Makes retries safe (random by default): a retry returns the schedule the first attempt created. */
  requestId?: string;
}

/** One pod of a job: a training node (node-0), a launcher or an initializer. */
export interface Step {
  /** Kiln's name ("launcher-0", "dataset-initializer-0"); logs take it or kubeflowName. */
  name: string;
  /** The Kubeflow SDK's name ("node-0" for an MPI launcher, "dataset-initializer"). */
  kubeflowName: string;
  status: string;
  pod: string;
  node: string;
  devices: Record<string, number>;
  restarts: number;
  exitCode?: number;
  reason: string;
  message: string;
}

/** A checkpoint a job's trainer saved: its step and where it is. */
export interface Checkpoint {
  step: number;
  path: string;
}

/** What a job's trainer last reported (its TrainJob's status.trainerStatus), with what Kiln reads from it. */
export interface Progress {
  /** Percent complete (0 to 100), and the trainer's estimate of the training time left; undefined when it does not know them. */
  percent?: number;
  etaSeconds?: number;
  /** From the metrics of those names; undefined when not reported. */
  step?: number;
  totalSteps?: number;
  /** The latest values as reported (strings), in the trainer's order. */
  metrics: Record<string, string>;
  /** When the trainer observed this. */
  updateTime?: Date;
  /** The newest checkpoint the trainer reported; undefined before the first. */
  checkpoint?: Checkpoint;
  /**
   * The job's kiln.dev/progress-deadline: how long it may go without reporting before Kiln
   * restarts it once, then fails it; and when that falls due if the job stays silent
   * (undefined while it does not run).
   */
  progressDeadlineSeconds?: number;
  stallTime?: Date;
}

/** One value of a metric: when the trainer reported it, at which step (undefined when it reported none), and the value. */
export interface MetricPoint {
  time?: Date;
  step?: number;
  value: number;
}

/** A job and what happens to it. */
export interface TrainJob {
  name: string;
  namespace: string;
  runtime: string;
  status: Status;
  reason: string;
  message: string;
  numNodes: number;
  creationTimestamp?: Date;
  startTime?: Date;
  completionTime?: Date;
  /** When the active deadline fails the job, while it runs. */
  deadlineTime?: Date;
  /** When the TTL deletes the finished job. */
  ttlDeleteTime?: Date;
  /** The deadline and TTL in force: the job's own, else its runtime's runPolicy. */
  activeDeadlineSeconds?: number;
  ttlSecondsAfterFinished?: number;
  queue: string;
  queuePosition: number;
  labels: Record<string, string>;
  steps: Step[];
  /**
   * Restarts of all the job's pods together by its runtime's failure policy, and those of them
   * that counted against its maxRestarts (disruptions do not); docs/fault-tolerance.md.
   */
  restarts: number;
  restartsCounted: number;
  /**
   * What the job's trainer last reported (undefined until it reports), and its latest metric
   * values by name; getJobMetrics() returns their history.
   */
  progress?: Progress;
  metrics: Record<string, string>;
  /** The API's message, with every field the server returned. */
  raw: TrainJobMessage;
}

/** A schedule (a CronTrainJob) and what it did. */
export interface Schedule {
  name: string;
  namespace: string;
  schedule: string;
  timeZone: string;
  concurrencyPolicy: ConcurrencyPolicy;
  suspend: boolean;
  startingDeadlineSeconds?: number;
  /** How many completed and failed runs are kept (undefined: the server's 3 and 1). */
  successfulJobsHistoryLimit?: number;
  failedJobsHistoryLimit?: number;
  /** What the schedule sets for each run (an empty image, 0 nodes or no deadline take the runtime's). */
  runtime: string;
  image: string;
  numNodes: number;
  queue: string;
  activeDeadlineSeconds?: number;
  /** The names of the runs that have not finished. */
  active: string[];
  lastScheduleTime?: Date;
  lastSuccessfulTime?: Date;
  /** The next time a run falls due; undefined while suspended. */
  nextScheduleTime?: Date;
  creationTimestamp?: Date;
  labels: Record<string, string>;
  /** The API's message, with every field the server returned. */
  raw: CronTrainJob;
}

/** A training runtime. */
export interface RuntimeInfo {
  name: string;
  namespace: string;
  framework: string;
  image: string;
  numNodes: number;
  cluster: boolean;
  deprecated: boolean;
  steps: string[];
  activeDeadlineSeconds?: number;
  ttlSecondsAfterFinished?: number;
  raw: Runtime;
}

/** A job that was waited for failed. */
export class JobFailedError extends Error {
  override name = "JobFailedError";
  constructor(readonly job: TrainJob) {
    super(`TrainJob ${job.namespace}/${job.name} failed (${job.reason}): ${job.message}`);
  }
}

const date = (t?: Timestamp) => (t ? timestampDate(t) : undefined);
const num = (n?: bigint | number) => (n === undefined ? undefined : Number(n));

export function jobOf(j: TrainJobMessage): TrainJob {
  const st = j.status;
  return {
    name: j.name,
    namespace: j.namespace,
    runtime: j.spec?.runtime ?? "",
    status: (st?.status as Status) || statusOfState[st?.state ?? State.UNSPECIFIED] || "Created",
    reason: st?.reason ?? "",
    message: st?.message ?? "",
    numNodes: j.spec?.nodes ?? 0,
    creationTimestamp: date(j.createTime),
    startTime: date(st?.startTime),
    completionTime: date(st?.completionTime),
    deadlineTime: date(st?.deadlineTime),
    ttlDeleteTime: date(st?.ttlDeleteTime),
    activeDeadlineSeconds: num(st?.activeDeadlineSeconds),
    ttlSecondsAfterFinished: num(st?.ttlSecondsAfterFinished),
    queue: j.spec?.queue || st?.queue?.localQueue || "",
    queuePosition: st?.queue?.positionInLocalQueue ?? 0,
    labels: { ...j.labels },
    steps: (st?.steps ?? []).map((s) => ({
      name: s.name,
      kubeflowName: s.kubeflowName || s.name,
      status: s.phase,
      pod: s.pod,
      node: s.node,
      devices: Object.fromEntries(s.devices.map((d) => [d.resource, Number(d.count)])),
      restarts: s.restarts,
      exitCode: s.exitCode,
      reason: s.reason,
      message: s.message,
    })),
    restarts: st?.restarts?.count ?? 0,
    restartsCounted: st?.restarts?.countedTowardsMax ?? 0,
    progress: st?.progress ? progressOf(st.progress) : undefined,
    metrics: metricsOf(st?.progress),
    raw: j,
  };
}

function metricsOf(p?: ProgressMessage): Record<string, string> {
  return Object.fromEntries((p?.metrics ?? []).map((m) => [m.name, m.value]));
}

function progressOf(p: ProgressMessage): Progress {
  return {
    percent: p.percent,
    etaSeconds: p.etaSeconds,
    step: num(p.step),
    totalSteps: num(p.totalSteps),
    metrics: metricsOf(p),
    updateTime: date(p.updateTime),
    checkpoint: p.checkpoint ? { step: Number(p.checkpoint.step), path: p.checkpoint.path } : undefined,
    progressDeadlineSeconds: num(p.progressDeadlineSeconds),
    stallTime: date(p.stallTime),
  };
}

/** The series' points by metric name, as they came. */
function pointsOf(series: MetricSeries[]): Record<string, MetricPoint[]> {
  const out: Record<string, MetricPoint[]> = {};
  for (const s of series) {
    (out[s.name] ??= []).push(...s.points.map((p) => ({ time: date(p.time), step: num(p.step), value: p.value })));
  }
  return out;
}

/** The points newer than the newest of their metric in last, which moves on. */
function fresh(points: Record<string, MetricPoint[]>, last: Map<string, number>): Record<string, MetricPoint[]> {
  const out: Record<string, MetricPoint[]> = {};
  for (const [name, ps] of Object.entries(points)) {
    for (const p of ps) {
      const t = p.time?.getTime();
      const seen = last.get(name);
      if (t !== undefined && seen !== undefined && t <= seen) continue;
      (out[name] ??= []).push(p);
      if (t !== undefined) last.set(name, t);
    }
  }
  return out;
}

export function scheduleOf(s: CronTrainJob): Schedule {
  const spec = s.spec;
  const run = spec?.trainJob?.spec;
  return {
    name: s.name,
    namespace: s.namespace,
    schedule: spec?.schedule ?? "",
    timeZone: spec?.timeZone ?? "",
    concurrencyPolicy: policyOf[spec?.concurrencyPolicy ?? Policy.UNSPECIFIED] ?? "Allow",
    suspend: spec?.suspend ?? false,
    startingDeadlineSeconds: num(spec?.startingDeadlineSeconds),
    successfulJobsHistoryLimit: spec?.successfulJobsHistoryLimit,
    failedJobsHistoryLimit: spec?.failedJobsHistoryLimit,
    runtime: run?.runtime ?? "",
    image: run?.image ?? "",
    numNodes: run?.nodes ?? 0,
    queue: run?.queue ?? "",
    activeDeadlineSeconds: num(run?.activeDeadlineSeconds),
    active: [...(s.status?.active ?? [])],
    lastScheduleTime: date(s.status?.lastScheduleTime),
    lastSuccessfulTime: date(s.status?.lastSuccessfulTime),
    nextScheduleTime: date(s.status?.nextScheduleTime),
    creationTimestamp: date(s.createTime),
    labels: { ...s.labels },
    raw: s,
  };
}

function runtimeOf(r: Runtime): RuntimeInfo {
  return {
    name: r.name,
    namespace: r.namespace,
    framework: r.framework,
    image: r.image,
    numNodes: r.nodes,
    cluster: r.kind !== RuntimeKind.NAMESPACED,
    deprecated: r.deprecated,
    steps: [...r.steps],
    activeDeadlineSeconds: num(r.runPolicy?.activeDeadlineSeconds),
    ttlSecondsAfterFinished: num(r.runPolicy?.ttlSecondsAfterFinished),
    raw: r,
  };
}

export interface ClientOptions {
  /** The API server's URL; with it no configuration file is needed. */
  server?: string;
  token?: string;
  /** A file holding the token, read again for every call (a pod's projected token). */
  tokenFile?: string;
  /** PEM file of the CAs that sign the server's certificate. */
  caFile?: string;
  namespace?: string;
  /** A context of the configuration file, and the file (default KILN_CONFIG, ~/.config/kiln/config.yaml). */
  context?: string;
  configFile?: string;
  /** A transport to use instead (tests, browsers); the options above are then ignored. */
  transport?: Transport;
  /**
   * Receives each warning the server gives with a job or schedule it created: what may keep
   * it from running (a missing claim, more than its queue admits, no command). Default:
   * console.warn("Warning: ..."), as kubectl prints Kubernetes' warnings.
   */
  onWarning?: (warning: string) => void;
}

/**
 * The client of one Kiln API server. With no options it reads the Kiln configuration as
 * the kiln CLI does (the file `make up` writes, and KILN_* variables).
 */
export class TrainerClient {
  readonly namespace: string;
  readonly server: string;
  /** The generated service clients, for what the verbs here do not cover. */
  readonly jobs: Client<typeof TrainJobService>;
  readonly runtimes: Client<typeof RuntimeService>;
  readonly queues: Client<typeof QueueService>;
  readonly info: Client<typeof ServerService>;
  readonly schedules: Client<typeof CronTrainJobService>;
  private readonly onWarning: (warning: string) => void;

  constructor(opts: ClientOptions = {}) {
    const c = (connector ?? transportOnly)(opts);
    this.onWarning = opts.onWarning ?? ((w: string) => console.warn(`Warning: ${w}`));
    this.namespace = c.namespace || "default";
    this.server = c.server;
    const transport = c.transport;
    this.jobs = createClient(TrainJobService, transport);
    this.runtimes = createClient(RuntimeService, transport);
    this.queues = createClient(QueueService, transport);
    this.info = createClient(ServerService, transport);
    this.schedules = createClient(CronTrainJobService, transport);
  }

  /** Submit a job and return its name; retried while the server is unavailable, with the same request id. */
  async train(o: TrainOptions): Promise<string> {
    const spec = trainJobSpec(o);
    // One request id for every attempt: that is what makes the retries safe.
    const requestId = o.requestId || newRequestId();
    const res = await retry(() =>
      this.jobs.createTrainJob({
        namespace: o.namespace || this.namespace,
        requestId,
        source: {
          case: "trainJob",
          value: {
            name: o.name ?? "",
            generateName: o.name || o.generateName ? (o.generateName ?? "") : `${spec.runtime}-`,
            labels: o.labels ?? {},
            annotations: o.annotations ?? {},
            spec,
          },
        },
      }),
    );
    res.warnings.forEach((w) => this.onWarning(w));
    return res.trainJob?.name ?? "";
  }

  /** The jobs of a namespace (or of all you may list), ordered by namespace and name. */
  async listJobs(o: { namespace?: string; allNamespaces?: boolean; labelSelector?: string; status?: Status[] } = {}): Promise<TrainJob[]> {
    const statuses = (o.status ?? []).map(checkStatus);
    const out: TrainJob[] = [];
    let pageToken = "";
    do {
      const res = await retry(() =>
        this.jobs.listTrainJobs({
          namespace: o.namespace || this.namespace,
          allNamespaces: o.allNamespaces ?? false,
          labelSelector: o.labelSelector ?? "",
          statuses,
          pageSize: 500,
          pageToken,
        }),
      );
      out.push(...res.trainJobs.map(jobOf));
      pageToken = res.nextPageToken;
    } while (pageToken);
    return out;
  }

  /** One job with its steps (pods) and timers. */
  async getJob(name: string, namespace?: string): Promise<TrainJob> {
    const res = await retry(() => this.jobs.getTrainJob({ namespace: namespace || this.namespace, name }));
    if (!res.trainJob) throw new NotFoundError(`TrainJob ${name}: the server returned no job`);
    return jobOf(res.trainJob);
  }

  /**
   * The lines a step printed: `node-0` by default, `step: null` for every step (each line
   * prefixed with [step]). `follow` waits for steps that have not started yet and streams
   * new lines until the job finishes; `tail` keeps the last lines of each step.
   */
  async *getJobLogs(
    name: string,
    o: {
      step?: string | null;
      follow?: boolean;
      tail?: number;
      namespace?: string;
      container?: string;
      signal?: AbortSignal;
      /** An earlier attempt's kept logs (from 0): the last MiB of each of its deleted pods. */
      attempt?: number;
      /** The kept logs of the attempt before the pods of now. */
      previous?: boolean;
    } = {},
  ): AsyncGenerator<string> {
    const step = o.step === undefined ? "node-0" : (o.step ?? "");
    try {
      const stream = this.jobs.streamLogs(
        {
          namespace: o.namespace || this.namespace,
          name,
          step,
          container: o.container ?? "",
          follow: o.follow ?? false,
          tailLines: o.tail === undefined ? undefined : BigInt(o.tail),
          attempt: o.attempt,
          previous: o.previous ?? false,
        },
        { signal: o.signal },
      );
      for await (const res of stream) {
        for (const l of res.lines) yield step ? l.text : `[${l.step}] ${l.text}`;
      }
    } catch (e) {
      throw toKilnError(e);
    }
  }

  /** The Kubernetes events of a job and of every object it owns, oldest first. */
  async getJobEvents(name: string, namespace?: string): Promise<Event[]> {
    return (await retry(() => this.jobs.listEvents({ namespace: namespace || this.namespace, name }))).events;
  }

  /**
   * The history of the numeric metrics a job's trainer reported, by name, oldest point first:
   * at most 500 points a metric, spread evenly over the whole run, then the latest value.
   * `metrics` names those wanted (none: all).
   */
  async getJobMetrics(name: string, o: { metrics?: string[]; namespace?: string } = {}): Promise<Record<string, MetricPoint[]>> {
    const res = await retry(() => this.jobs.getTrainJobMetrics({ namespace: o.namespace || this.namespace, name, metrics: o.metrics ?? [] }));
    return pointsOf(res.series);
  }

  /**
   * Stream a job's metrics (those named, or all) by name: first their whole history, then the
   * points of each new report as it arrives. It ends when the job has completed or failed, when
   * the loop stops, or when `signal` aborts. A stream that drops is opened again (after 100 ms,
   * doubling up to 5 s while it keeps dropping): its history comes again, and only the points
   * newer than those already yielded are yielded, so every point comes once.
   */
  async *watchJobMetrics(
    name: string,
    o: { metrics?: string[]; namespace?: string; signal?: AbortSignal } = {},
  ): AsyncGenerator<Record<string, MetricPoint[]>> {
    const req = { namespace: o.namespace || this.namespace, name, metrics: o.metrics ?? [] };
    const last = new Map<string, number>();
    let started = false;
    let backoff = 100;
    for (;;) {
      // Leaving the loop early cancels the stream, so that no connection outlives it.
      const ac = new AbortController();
      const abort = () => ac.abort();
      if (o.signal?.aborted) abort();
      o.signal?.addEventListener("abort", abort);
      try {
        for await (const ev of this.jobs.watchTrainJobMetrics(req, { signal: ac.signal })) {
          if (ev.event.case === "finished") return;
          if (ev.event.case !== "history" && ev.event.case !== "points") continue; // an event of a newer server
          const got = fresh(pointsOf(ev.event.value.series), last);
          if (Object.keys(got).length > 0 || !started) {
            // The first history comes even when empty: the watch is on.
            started = true;
            yield got;
          }
        }
      } catch (e) {
        const err = toKilnError(e);
        if (o.signal?.aborted || !(err instanceof KilnError) || (err.code !== "unavailable" && err.code !== "unknown")) throw err;
      } finally {
        o.signal?.removeEventListener("abort", abort);
        ac.abort();
      }
      // The server restarted or a proxy dropped the stream: open it again.
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  /**
   * Wait until the job reaches one of `status` and return it. A job that fails while
   * Failed is not among them throws JobFailedError; a job deleted meanwhile NotFoundError;
   * the timeout (seconds, default 600) DeadlineExceededError. Each callback gets the job on
   * every change. The wait follows the server's watch and resumes it if the connection drops.
   */
  async waitForJobStatus(
    name: string,
    status: Status | Status[] = "Complete",
    o: { timeout?: number; callbacks?: ((job: TrainJob) => void)[]; namespace?: string } = {},
  ): Promise<TrainJob> {
    const wanted = Array.isArray(status) ? status : [status];
    if (wanted.length === 0) throw new TypeError(`status: name at least one of ${STATUSES.join(", ")}`);
    wanted.forEach(checkStatus);
    const ns = o.namespace || this.namespace;
    const timeout = o.timeout ?? 600;
    const deadline = Date.now() + timeout * 1000;
    const late = () => new DeadlineExceededError(`TrainJob ${ns}/${name} did not reach ${wanted.join("/")} in ${timeout}s`);
    let rv = "";
    let seen = false;
    let backoff = 100;
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw late();
      // The stream ends at the deadline; leaving it early (found, failed) cancels it, so
      // that no connection or timer outlives the wait.
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), remaining);
      try {
        const opts: CallOptions = { signal: ac.signal };
        for await (const ev of this.jobs.watchTrainJobs({ namespace: ns, name, resourceVersion: rv }, opts)) {
          if (ev.resourceVersion) rv = ev.resourceVersion;
          if (ev.type === WatchEventType.DELETED) throw new NotFoundError(`TrainJob ${ns}/${name} was deleted while waiting for it`);
          if (ev.type === WatchEventType.SYNCED && !seen) throw new NotFoundError(`TrainJob "${name}" not found in namespace ${ns}`);
          if ((ev.type === WatchEventType.ADDED || ev.type === WatchEventType.MODIFIED) && ev.trainJob) {
            seen = true;
            const job = jobOf(ev.trainJob);
            for (const cb of o.callbacks ?? []) cb(job);
            if (wanted.includes(job.status)) return job;
            if (job.status === "Failed") throw new JobFailedError(job);
          }
        }
      } catch (e) {
        if (e instanceof KilnError || e instanceof JobFailedError) throw e;
        if (Date.now() >= deadline - 50) throw late();
        const err = toKilnError(e);
        if (!(err instanceof KilnError) || (err.code !== "unavailable" && err.code !== "unknown")) throw err;
      } finally {
        clearTimeout(timer);
        ac.abort();
      }
      // The server restarted or a proxy dropped the stream: resume from rv.
      await sleep(Math.min(backoff, Math.max(0, deadline - Date.now())));
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  /** Stop a job's pods and its deadline clock; a queued job leaves Kueue's queue and its quota. */
  async suspendJob(name: string, namespace?: string): Promise<TrainJob> {
    const res = await call(() => this.jobs.suspendTrainJob({ namespace: namespace || this.namespace, name }));
    return jobOf(res.trainJob!);
  }

  /** Undo suspendJob: the job goes back to its queue (or runs again). */
  async resumeJob(name: string, namespace?: string): Promise<TrainJob> {
    const res = await call(() => this.jobs.resumeTrainJob({ namespace: namespace || this.namespace, name }));
    return jobOf(res.trainJob!);
  }

  /** Delete a job and everything it owns. */
  async deleteJob(name: string, namespace?: string): Promise<void> {
    await call(() => this.jobs.deleteTrainJob({ namespace: namespace || this.namespace, name }));
  }

  /**
   * Create a schedule: at each time of its cron expression (read in timeZone, default UTC)
   * it creates a run, a job made as train() makes one. Retried while the server is
   * unavailable, with the same request id, so a lost answer never creates it twice.
   */
  async createSchedule(o: ScheduleOptions): Promise<Schedule> {
    const concurrencyPolicy = policy(o.concurrencyPolicy === undefined ? "Allow" : o.concurrencyPolicy);
    const spec = trainJobSpec({ ...o, suspend: false });
    const requestId = o.requestId || newRequestId();
    const res = await retry(() =>
      this.schedules.createCronTrainJob({
        namespace: o.namespace || this.namespace,
        requestId,
        source: {
          case: "cronTrainJob",
          value: {
            name: o.name,
            labels: o.labels ?? {},
            annotations: o.annotations ?? {},
            spec: {
              schedule: o.schedule,
              timeZone: o.timeZone ?? "",
              concurrencyPolicy,
              startingDeadlineSeconds: o.startingDeadlineSeconds === undefined ? undefined : BigInt(o.startingDeadlineSeconds),
              suspend: o.suspend ?? false,
              successfulJobsHistoryLimit: o.successfulJobsHistoryLimit,
              failedJobsHistoryLimit: o.failedJobsHistoryLimit,
              trainJob: { labels: o.runLabels ?? {}, spec },
            },
          },
        },
      }),
    );
    res.warnings.forEach((w) => this.onWarning(w));
    return scheduleOf(res.cronTrainJob!);
  }

  /** The schedules of a namespace (or of all you may list), ordered by namespace and name. */
  async listSchedules(o: { namespace?: string; allNamespaces?: boolean; labelSelector?: string } = {}): Promise<Schedule[]> {
    const res = await retry(() =>
      this.schedules.listCronTrainJobs({ namespace: o.namespace || this.namespace, allNamespaces: o.allNamespaces ?? false, labelSelector: o.labelSelector ?? "" }),
    );
    return res.cronTrainJobs.map(scheduleOf);
  }

  /** One schedule, with its active runs and the next time one falls due. */
  async getSchedule(name: string, namespace?: string): Promise<Schedule> {
    const res = await retry(() => this.schedules.getCronTrainJob({ namespace: namespace || this.namespace, name }));
    if (!res.cronTrainJob) throw new NotFoundError(`CronTrainJob ${name}: the server returned no schedule`);
    return scheduleOf(res.cronTrainJob);
  }

  /** Stop new runs; runs already created go on. */
  async suspendSchedule(name: string, namespace?: string): Promise<Schedule> {
    const res = await call(() => this.schedules.suspendCronTrainJob({ namespace: namespace || this.namespace, name }));
    return scheduleOf(res.cronTrainJob!);
  }

  /** Undo suspendSchedule. A time missed meanwhile runs once if it is within the starting deadline. */
  async resumeSchedule(name: string, namespace?: string): Promise<Schedule> {
    const res = await call(() => this.schedules.resumeCronTrainJob({ namespace: namespace || this.namespace, name }));
    return scheduleOf(res.cronTrainJob!);
  }

  /**
   * Create a run now, outside the schedule, and return its name. Retried while the server
   * is unavailable, with the same request id, so a lost answer never creates a second run.
   */
  async triggerSchedule(name: string, namespace?: string, o: { requestId?: string } = {}): Promise<string> {
    const requestId = o.requestId || newRequestId();
    const res = await retry(() => this.schedules.triggerCronTrainJob({ namespace: namespace || this.namespace, name, requestId }));
    return res.trainJob?.name ?? "";
  }

  /** Delete a schedule and, unless keepRuns, its runs. */
  async deleteSchedule(name: string, namespace?: string, o: { keepRuns?: boolean } = {}): Promise<void> {
    await call(() => this.schedules.deleteCronTrainJob({ namespace: namespace || this.namespace, name, keepRuns: o.keepRuns ?? false }));
  }

  /** The runs of a schedule, newest first (without their steps). */
  async listScheduleRuns(name: string, namespace?: string): Promise<TrainJob[]> {
    return (await retry(() => this.schedules.listCronTrainJobRuns({ namespace: namespace || this.namespace, name }))).trainJobs.map(jobOf);
  }

  /**
   * Convert PyTorchJobs (kubeflow.org/v1), batch Jobs and CronJobs, and TrainJobs of the
   * v2alpha1 draft (YAML or JSON, several documents allowed) into TrainJob and CronTrainJob
   * manifests, creating nothing. `manifests` of the answer are the results, in order;
   * `warnings` name each source field that did not carry over (`note` marks what carried
   * over in another form).
   */
  async convertManifests(manifests: string, o: { runtime?: string; namespace?: string } = {}): Promise<ConvertManifestsResponse> {
    return await retry(() => this.jobs.convertManifests({ manifests, runtime: o.runtime ?? "", namespace: o.namespace ?? "" }));
  }

  /** The cluster's runtimes, then the TrainingRuntimes of the namespace. */
  async listRuntimes(namespace?: string): Promise<RuntimeInfo[]> {
    return (await retry(() => this.runtimes.listRuntimes({ namespace: namespace || this.namespace }))).runtimes.map(runtimeOf);
  }

  /** A ClusterTrainingRuntime, or with a namespace a TrainingRuntime of it. */
  async getRuntime(name: string, namespace?: string): Promise<RuntimeInfo> {
    const kind = namespace ? RuntimeKind.NAMESPACED : RuntimeKind.CLUSTER;
    const res = await retry(() => this.runtimes.getRuntime({ name, namespace: namespace ?? "", kind }));
    return runtimeOf(res.runtime!);
  }

  /** Kueue's LocalQueues of the namespace (or of all you may list). */
  async listQueues(o: { namespace?: string; allNamespaces?: boolean } = {}): Promise<Queue[]> {
    return (await retry(() => this.queues.listQueues({ namespace: o.namespace || this.namespace, allNamespaces: o.allNamespaces ?? false }))).queues;
  }
}

/** What a client talks through, from its options: see setConnector. */
export interface Connection {
  namespace: string;
  server: string;
  transport: Transport;
}

/** Turns a client's options into its connection. */
export type Connector = (opts: ClientOptions) => Connection;

let connector: Connector | undefined;

/**
 * Sets how clients made without a transport connect: the Node.js entry point sets one that
 * reads the Kiln configuration (KILN_CONFIG, KILN_* variables, the file `make up` writes).
 */
export function setConnector(c: Connector): void {
  connector = c;
}

// Where no connector is set (a browser), a client needs its transport.
function transportOnly(opts: ClientOptions): Connection {
  if (!opts.transport) {
    throw new ConfigError("no transport: in a browser, pass one (browserTransport from @kiln-ml/sdk/browser); in Node.js, import @kiln-ml/sdk");
  }
  return { namespace: opts.namespace || "default", server: opts.server ?? "", transport: opts.transport };
}

// A request id: 32 hex digits, from the platform's Web Crypto (Node.js 20 and browsers).
function newRequestId(): string {
  return globalThis.crypto.randomUUID().replaceAll("-", "");
}

/** The spec of a job, as train() submits it and as each run of a schedule is created from it. */
function trainJobSpec(
  o: Pick<
    TrainOptions,
    "runtime" | "trainer" | "initializer" | "queue" | "priorityClass" | "topology" | "topologyPreferred" | "activeDeadlineSeconds" | "ttlSecondsAfterFinished" | "suspend"
  >,
): MessageInitShape<typeof TrainJobSpecSchema> & { runtime: string } {
  if (!o.runtime) throw new TypeError("runtime: name the runtime to train on, e.g. 'torch-distributed' (see listRuntimes())");
  if (o.topologyPreferred && !o.topology) throw new TypeError("topologyPreferred: name the level with topology, e.g. topology: 'rack'");
  const rt = typeof o.runtime === "string" ? { name: o.runtime, cluster: true } : o.runtime;
  const t = o.trainer ?? {};
  const resources = t.resourcesPerNode
    ? Object.fromEntries(Object.entries(t.resourcesPerNode).map(([k, v]) => [k, quantity(k, v)]))
    : undefined;
  return {
    runtime: rt.name,
    runtimeKind: rt.cluster ? RuntimeKind.UNSPECIFIED : RuntimeKind.NAMESPACED,
    image: t.image ?? "",
    command: t.command ?? [],
    args: t.args ?? [],
    env: Object.entries(t.env ?? {}).map(([name, value]) => ({ name, value: String(value) })),
    nodes: count("trainer.numNodes", t.numNodes),
    procsPerNode: count("trainer.numProcsPerNode", t.numProcsPerNode),
    resourcesPerNode: resources ? { requests: resources, limits: resources } : undefined,
    datasetUri: o.initializer?.dataset ?? "",
    modelUri: o.initializer?.model ?? "",
    queue: o.queue ?? "",
    priorityClass: o.priorityClass ?? "",
    suspend: o.suspend ?? false,
    activeDeadlineSeconds: o.activeDeadlineSeconds === undefined ? undefined : BigInt(o.activeDeadlineSeconds),
    ttlSecondsAfterFinished: o.ttlSecondsAfterFinished,
    topology: o.topology ? { level: o.topology, preferred: o.topologyPreferred ?? false } : undefined,
  };
}

/** call runs f, turning a Connect error into a KilnError. */
async function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw toKilnError(e);
  }
}

/** retry runs f (which must be safe to repeat) again while the server is unavailable, up to 5 attempts. */
async function retry<T>(f: () => Promise<T>): Promise<T> {
  let backoff = 200;
  for (let attempt = 1; ; attempt++) {
    try {
      return await f();
    } catch (e) {
      const err = toKilnError(e);
      if (!(err instanceof KilnError) || err.code !== "unavailable" || attempt === 5) throw err;
      await sleep(err.retryAfter ? err.retryAfter * 1000 : backoff);
      backoff = Math.min(backoff * 2, 3000);
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function count(what: string, n?: number): number {
  if (n === undefined) return 0;
  if (!Number.isInteger(n) || n < 1) throw new TypeError(`${what}: want a whole number of at least 1, got ${n} (leave it unset for the runtime's)`);
  return n;
}

function quantity(resource: string, v: string | number): string {
  if (typeof v !== "string" && typeof v !== "number") {
    throw new TypeError(`trainer.resourcesPerNode['${resource}']: want a quantity such as 4, '500m' or '16Gi', got ${String(v)}`);
  }
  return String(v);
}
