import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";

import { Code, ConnectError, v1 } from "@kiln-ml/sdk/browser";
import { filterJobs, noFilter, parseLabels } from "../src/filter.js";
import { applyEvent, emptyJobs, fatal } from "../src/jobs.js";

function job(name: string, state: v1.State, created: number, spec: Partial<{ queue: string; runtime: string }> = {}, labels: Record<string, string> = {}): v1.TrainJob {
  return create(v1.TrainJobSchema, {
    name,
    namespace: "team-a",
    labels,
    createTime: { seconds: BigInt(created) },
    spec: { runtime: spec.runtime ?? "torch-distributed", queue: spec.queue ?? "" },
    status: { state },
  });
}

const ev = (type: v1.WatchEventType, j?: v1.TrainJob, rv = "") => create(v1.WatchTrainJobsResponseSchema, { type, trainJob: j, resourceVersion: rv });

test("the watch's events make the set: listed, synced, changed, deleted, resumed from the last version", () => {
  let s = emptyJobs();
  s = applyEvent(s, ev(v1.WatchEventType.ADDED, job("a", v1.State.QUEUED, 1), "10"));
  s = applyEvent(s, ev(v1.WatchEventType.ADDED, job("b", v1.State.RUNNING, 2), "11"));
  assert.equal(s.synced, false);
  s = applyEvent(s, ev(v1.WatchEventType.SYNCED, undefined, "11"));
  assert.equal(s.synced, true);
  const before = s;
  s = applyEvent(s, ev(v1.WatchEventType.MODIFIED, job("a", v1.State.RUNNING, 1), "12"));
  assert.notEqual(s, before, "a new set, so that the page draws again");
  assert.equal(s.jobs.get("a")?.status?.state, v1.State.RUNNING);
  assert.equal(before.jobs.get("a")?.status?.state, v1.State.QUEUED, "the old set is not changed");
  s = applyEvent(s, ev(v1.WatchEventType.DELETED, job("b", v1.State.RUNNING, 2), "13"));
  assert.deepEqual([...s.jobs.keys()], ["a"]);
  assert.equal(s.version, "13");
  const hb = applyEvent(s, ev(v1.WatchEventType.HEARTBEAT, undefined, "13"));
  assert.equal(hb, s, "a heartbeat at the same version changes nothing");
});

test("filters: state, queue, runtime, labels, name; newest first", () => {
  const jobs = [
    job("old-run", v1.State.COMPLETE, 1, { queue: "q1" }, { team: "nlp" }),
    job("new-run", v1.State.RUNNING, 3, { queue: "q1" }, { team: "nlp", tier: "gold" }),
    job("mid-run", v1.State.RUNNING, 2, { queue: "q2", runtime: "deepspeed" }, { team: "cv" }),
  ];
  assert.deepEqual(filterJobs(jobs, noFilter).map((j) => j.name), ["new-run", "mid-run", "old-run"]);
  assert.deepEqual(filterJobs(jobs, { ...noFilter, states: ["Running"] }).map((j) => j.name), ["new-run", "mid-run"]);
  assert.deepEqual(filterJobs(jobs, { ...noFilter, queue: "q1" }).map((j) => j.name), ["new-run", "old-run"]);
  assert.deepEqual(filterJobs(jobs, { ...noFilter, runtime: "deepspeed" }).map((j) => j.name), ["mid-run"]);
  assert.deepEqual(filterJobs(jobs, { ...noFilter, labels: "team=nlp,tier" }).map((j) => j.name), ["new-run"]);
  assert.deepEqual(filterJobs(jobs, { ...noFilter, labels: "team!=nlp" }).map((j) => j.name), ["mid-run"]);
  assert.deepEqual(filterJobs(jobs, { ...noFilter, text: "MID" }).map((j) => j.name), ["mid-run"]);
  assert.match(parseLabels("team=nlp, =x") as string, /cannot read "=x"/);
});

test("ten thousand jobs filter right", () => {
  const many = Array.from({ length: 10_000 }, (_, i) => job(`job-${i}`, i % 3 ? v1.State.RUNNING : v1.State.QUEUED, i, { queue: `q${i % 4}` }, { team: `t${i % 7}` }));
  const got = filterJobs(many, { ...noFilter, states: ["Running"], labels: "team=t3" });
  assert.ok(got.length > 0 && got.every((j) => j.labels.team === "t3" && j.status?.state === v1.State.RUNNING));
});

test("errors no retry fixes stop the watch; the others are retried", () => {
  assert.equal(fatal(new ConnectError("bad token", Code.Unauthenticated)), true);
  assert.equal(fatal(new ConnectError("not yours", Code.PermissionDenied)), true);
  assert.equal(fatal(new ConnectError("restarting", Code.Unavailable)), false);
});
