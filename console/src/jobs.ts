// The jobs of a namespace, live: a list, then every change, from WatchTrainJobs; resumed
// from the last version seen when the stream breaks.

import { Code, ConnectError, v1, type TrainerClient } from "@kiln-ml/sdk/browser";
import { keepReading } from "./retry.js";

export interface JobSet {
  /** By name. */
  jobs: Map<string, v1.TrainJob>;
  /** The list has been received in full. */
  synced: boolean;
  /** The version to resume from. */
  version: string;
}

export function emptyJobs(): JobSet {
  return { jobs: new Map(), synced: false, version: "" };
}

/** The set after one event of the watch (a new set when it changed). */
export function applyEvent(s: JobSet, ev: v1.WatchTrainJobsResponse): JobSet {
  const version = ev.resourceVersion || s.version;
  switch (ev.type) {
    case v1.WatchEventType.ADDED:
    case v1.WatchEventType.MODIFIED: {
      if (!ev.trainJob) return { ...s, version };
      const jobs = new Map(s.jobs);
      jobs.set(ev.trainJob.name, ev.trainJob);
      return { jobs, synced: s.synced, version };
    }
    case v1.WatchEventType.DELETED: {
      if (!ev.trainJob || !s.jobs.has(ev.trainJob.name)) return { ...s, version };
      const jobs = new Map(s.jobs);
      jobs.delete(ev.trainJob.name);
      return { jobs, synced: s.synced, version };
    }
    case v1.WatchEventType.SYNCED:
      return { ...s, synced: true, version };
    default:
      return s.version === version ? s : { ...s, version };
  }
}

/** An error that no retry will fix: the caller must act (log in again, pick a namespace). */
export function fatal(e: unknown): boolean {
  const c = ConnectError.from(e).code;
  return c === Code.Unauthenticated || c === Code.PermissionDenied || c === Code.InvalidArgument || c === Code.NotFound;
}

/**
 * Watches the jobs of namespace ns until signal aborts, calling onChange with each new set
 * (batched to one call per animation frame) and onError with what stops it or delays it.
 */
export async function watchJobs(
  client: TrainerClient,
  ns: string,
  signal: AbortSignal,
  onChange: (s: JobSet) => void,
  onError: (e: ConnectError | undefined) => void,
): Promise<void> {
  let s = emptyJobs();
  let frame = 0;
  const flush = () => {
    frame = 0;
    onChange(s);
  };
  await keepReading(
    signal,
    async (got) => {
      const stream = client.jobs.watchTrainJobs({ namespace: ns, resourceVersion: s.synced ? s.version : "", heartbeatSeconds: 30 }, { signal });
      for await (const ev of stream) {
        const next = applyEvent(s, ev);
        if (next !== s) {
          s = next;
          if (!frame) frame = requestAnimationFrame(flush);
        }
        got();
        onError(undefined);
      }
    },
    {
      reopenAtEnd: true,
      failed: (e) => {
        const err = ConnectError.from(e);
        onError(err);
        if (fatal(err)) return false;
        if (err.code === Code.OutOfRange || err.code === Code.Aborted) s = emptyJobs(); // the version is gone: list again
        return true;
      },
    },
  );
}
