// The SDK against a real Kiln API server: the local platform (make up), or any server the
// Kiln configuration names. Skipped unless KILN_SDK_LIVE=1 (make test sets it, with
// KILN_CONFIG pointing at the local platform's configuration).

import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

import { InvalidArgumentError, JobFailedError, NotFoundError, PermissionDeniedError, TrainerClient, type CustomTrainerContainer } from "../src/index.js";

const live = process.env.KILN_SDK_LIVE === "1";
const queue = process.env.KILN_SDK_QUEUE || "default";
const skip = live ? false : "KILN_SDK_LIVE=1 runs these against the Kiln API server of the Kiln configuration";

function setup(t: TestContext): { c: TrainerClient; name: (what: string) => string } {
  const c = new TrainerClient();
  const names: string[] = [];
  t.after(async () => {
    for (const n of names) await c.deleteJob(n).catch(() => undefined);
  });
  return {
    c,
    name: (what) => {
      const n = `sdk-ts-${what}-${randomBytes(3).toString("hex").slice(0, 5)}`;
      names.push(n);
      return n;
    },
  };
}

const manifest = () => readFileSync(new URL("../../../testdata/slow-trainjob.yaml", import.meta.url), "utf8");

function slowJob(name: string, seconds: number, deadline?: number): string {
  return manifest()
    .replaceAll("NAME", name)
    .replaceAll("QUEUE", queue)
    .replaceAll("DURATION", `${seconds}s`)
    .replaceAll("DEADLINE", deadline ? `activeDeadlineSeconds: ${deadline}` : "");
}

/** The runtime and training container of the shared manifest (its image is the runtime's). */
function manifestRun(): { runtime: string; trainer: CustomTrainerContainer } {
  const text = manifest();
  const runtime = /runtimeRef: \{name: ([\w.-]+)\}/.exec(text);
  const trainer = /trainer: \{command: \[([^\]]*)\], numNodes: (\d+)\}/.exec(text);
  if (!runtime || !trainer) throw new Error("slow-trainjob.yaml: no runtimeRef or trainer line in the form this test reads");
  return { runtime: runtime[1], trainer: { command: trainer[1].split(",").map((c) => c.trim()), numNodes: Number(trainer[2]) } };
}

async function eventually(cond: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`not true after ${timeoutMs / 1000}s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test("submit, wait, logs and events", { skip }, async (t) => {
  const { c, name } = setup(t);
  const n = await c.train({
    runtime: "torch-distributed",
    trainer: { command: ["torchrun", "train.py"], numNodes: 2, resourcesPerNode: { "nvidia.com/gpu": 8 } },
    queue,
    activeDeadlineSeconds: 28800,
    ttlSecondsAfterFinished: 86400,
    name: name("quick"),
    labels: { team: "sdk-ts" },
  });
  const seen: string[] = [];
  const j = await c.waitForJobStatus(n, "Complete", { timeout: 120, callbacks: [(j) => seen.push(j.status)] });
  assert.equal(j.reason, "AllJobsCompleted");
  assert.ok(seen.includes("Running"), String(seen));
  const got = await c.getJob(n);
  assert.deepEqual([got.steps.length, got.steps[0].devices["nvidia.com/gpu"], got.activeDeadlineSeconds, got.ttlSecondsAfterFinished], [2, 8, 28800, 86400]);
  assert.deepEqual((await c.listJobs({ labelSelector: "team=sdk-ts", status: ["Complete"] })).map((j) => j.name), [n]);
  const lines: string[] = [];
  for await (const l of c.getJobLogs(n, { follow: true })) lines.push(l);
  assert.equal(lines.at(-1), "[kiln-sim] training complete");
  const reasons = new Set((await c.getJobEvents(n)).map((e) => `${e.object.split("/")[0]}/${e.reason}`));
  for (const want of ["TrainJob/Created", "TrainJob/Completed", "Workload/Admitted"]) assert.ok(reasons.has(want), `${want} in ${[...reasons]}`);
});

test("a deadline fails the job", { skip }, async (t) => {
  const { c, name } = setup(t);
  const n = name("deadline");
  await c.jobs.createTrainJob({ namespace: c.namespace, source: { case: "manifest", value: slowJob(n, 60, 3) } });
  await assert.rejects(c.waitForJobStatus(n, "Complete", { timeout: 90 }), (e: unknown) => e instanceof JobFailedError && e.job.reason === "DeadlineExceeded");
});

test("the TTL deletes the finished job", { skip }, async (t) => {
  const { c, name } = setup(t);
  const n = await c.train({ runtime: "torch-distributed", trainer: { numNodes: 1 }, ttlSecondsAfterFinished: 2, name: name("ttl") });
  assert.ok((await c.waitForJobStatus(n, "Complete", { timeout: 120 })).ttlDeleteTime);
  await assert.rejects(c.waitForJobStatus(n, "Failed", { timeout: 60 }), (e: unknown) => e instanceof NotFoundError && /deleted while waiting/.test(e.message));
});

test("suspend and resume under a Kueue queue", { skip }, async (t) => {
  const { c, name } = setup(t);
  const n = name("suspend");
  await c.jobs.createTrainJob({ namespace: c.namespace, source: { case: "manifest", value: slowJob(n, 60) } });
  await c.waitForJobStatus(n, "Running", { timeout: 60 });
  assert.equal((await c.suspendJob(n)).status, "Suspended");
  const now = await c.getJob(n);
  assert.deepEqual([now.status, now.reason, now.deadlineTime], ["Suspended", "Deactivated", undefined]);
  // Once Kueue has stopped it (spec.suspend), the operator clears its start time; resuming
  // before that would find it never stopped, still Running.
  await eventually(async () => {
    const j = await c.getJob(n);
    return j.raw.spec?.suspend === true && j.startTime === undefined;
  });
  assert.equal((await c.resumeJob(n)).status, "Queued");
  await c.waitForJobStatus(n, "Running", { timeout: 60 });
  await eventually(async () => (await c.getJob(n)).startTime !== undefined);
});

test("permission denied in another namespace; a validation error names its field", { skip }, async (t) => {
  const { c } = setup(t);
  await assert.rejects(c.listJobs({ namespace: "kube-system" }), (e: unknown) => e instanceof PermissionDeniedError && /in namespace kube-system/.test(e.message));
  await assert.rejects(
    c.train({ runtime: "torch-distributed", trainer: { resourcesPerNode: { "nvidia.com/gpu": "eight" } } }),
    (e: unknown) => e instanceof InvalidArgumentError && e.fieldViolations.some((v) => v.field === "train_job.spec.resources_per_node.requests[nvidia.com/gpu]"),
  );
});

test("a retried train creates one job", { skip }, async (t) => {
  const { c } = setup(t);
  const id = randomBytes(16).toString("hex");
  const o = { runtime: "torch-distributed", trainer: { numNodes: 1 }, generateName: "sdk-ts-retry-", labels: { retry: id.slice(0, 8) }, requestId: id };
  const first = await c.train(o);
  t.after(() => c.deleteJob(first).catch(() => undefined));
  assert.equal(await c.train(o), first);
  assert.deepEqual((await c.listJobs({ labelSelector: `retry=${id.slice(0, 8)}` })).map((j) => j.name), [first]);
});

test("a weekly schedule: next run, suspend and resume, a run triggered, delete", { skip }, async (t) => {
  const { c } = setup(t);
  const { runtime, trainer } = manifestRun();
  const n = `sdk-ts-weekly-${randomBytes(3).toString("hex").slice(0, 5)}`;
  t.after(() => c.deleteSchedule(n).catch(() => undefined));
  let s = await c.createSchedule({
    name: n,
    schedule: "0 2 * * 0",
    runtime,
    trainer,
    timeZone: "Europe/Berlin",
    concurrencyPolicy: "Forbid",
    successfulJobsHistoryLimit: 2,
    failedJobsHistoryLimit: 1,
    queue,
    activeDeadlineSeconds: 43200,
  });
  assert.deepEqual([s.name, s.schedule, s.timeZone, s.concurrencyPolicy, s.suspend], [n, "0 2 * * 0", "Europe/Berlin", "Forbid", false]);
  assert.deepEqual([s.successfulJobsHistoryLimit, s.failedJobsHistoryLimit, s.activeDeadlineSeconds], [2, 1, 43200]);
  assert.deepEqual([s.runtime, s.numNodes, s.queue], [runtime, trainer.numNodes, queue]);
  assert.ok(s.nextScheduleTime instanceof Date, "a next run");
  const berlin = new Intl.DateTimeFormat("en-US", { timeZone: "Europe/Berlin", weekday: "long", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const parts = Object.fromEntries(berlin.formatToParts(s.nextScheduleTime).map((p) => [p.type, p.value]));
  assert.deepEqual([parts.weekday, parts.hour, parts.minute], ["Sunday", "02", "00"], `next run ${s.nextScheduleTime.toISOString()}: want a Sunday at 02:00 in Berlin`);
  // Lists read the server's cache, which sees the new schedule a moment later.
  await eventually(async () => (await c.listSchedules()).some((x) => x.name === n));

  s = await c.suspendSchedule(n);
  assert.deepEqual([s.suspend, s.nextScheduleTime], [true, undefined]);
  s = await c.resumeSchedule(n);
  assert.equal(s.suspend, false);
  assert.ok(s.nextScheduleTime instanceof Date);

  const run = await c.triggerSchedule(n);
  t.after(() => c.deleteJob(run).catch(() => undefined)); // should the schedule's deletion not take it
  assert.ok(run.startsWith(`${n}-`), run);
  await eventually(async () => (await c.listScheduleRuns(n)).map((j) => j.name).join() === run);

  await c.deleteSchedule(n);
  await eventually(() => c.getSchedule(n).then(() => false, (e: unknown) => e instanceof NotFoundError));
  await assert.rejects(c.getSchedule(n), (e: unknown) => e instanceof NotFoundError);
});
