// Schedules (CronTrainJobService) on the wire: what the client sends, and what it makes of
// the server's answers, against a local Connect server that answers as the API server does.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fromJson, type JsonObject } from "@bufbuild/protobuf";

import { NotFoundError, TrainerClient, scheduleOf, v1, type RuntimeInfo } from "../src/index.js";

const SERVICE = "/kiln.v1.CronTrainJobService/";

// A CronTrainJob as the API server answers it: a weekly retrain, Sundays at 02:00 in Berlin,
// with a run active and the next one due on Sunday 2026-11-29 at 02:00 CET (01:00 UTC).
const WEEKLY = {
  name: "weekly-retrain",
  namespace: "default",
  uid: "0b7e4c1e-5d0a-4f7e-9a53-3c1f6f1f2a10",
  resourceVersion: "4711",
  createTime: "2026-11-20T09:30:00Z",
  labels: { team: "nlp" },
  spec: {
    schedule: "0 2 * * 0",
    timeZone: "Europe/Berlin",
    concurrencyPolicy: "CONCURRENCY_POLICY_FORBID",
    startingDeadlineSeconds: "3600",
    successfulJobsHistoryLimit: 2,
    failedJobsHistoryLimit: 0,
    trainJob: {
      labels: { "kueue.x-k8s.io/queue-name": "default" },
      spec: {
        runtime: "torch-distributed",
        image: "ghcr.io/kiln-ml/retrain:1.4",
        command: ["torchrun", "retrain.py"],
        nodes: 4,
        queue: "default",
        activeDeadlineSeconds: "43200",
      },
    },
  },
  status: {
    active: ["weekly-retrain-29921820"],
    lastScheduleTime: "2026-11-22T01:00:00Z",
    lastSuccessfulTime: "2026-11-15T09:12:31.250Z",
    nextScheduleTime: "2026-11-29T02:00:00+01:00",
  },
};

// Two runs of it, newest first, as ListCronTrainJobRuns orders them.
const RUNS = [
  {
    name: "weekly-retrain-m4k2p",
    namespace: "default",
    createTime: "2026-11-24T10:41:07Z",
    labels: { "kiln.dev/cron-train-job": "weekly-retrain" },
    spec: { runtime: "torch-distributed", nodes: 4, queue: "default" },
    status: { state: "STATE_QUEUED", reason: "Pending", activeDeadlineSeconds: "43200", queue: { localQueue: "default", positionInLocalQueue: 2 } },
  },
  {
    name: "weekly-retrain-29921820",
    namespace: "default",
    createTime: "2026-11-22T01:00:02Z",
    labels: { "kiln.dev/cron-train-job": "weekly-retrain" },
    spec: { runtime: "torch-distributed", nodes: 4, queue: "default" },
    status: { state: "STATE_COMPLETE", reason: "AllJobsCompleted", startTime: "2026-11-22T01:00:05Z", completionTime: "2026-11-22T09:12:31Z",
      restarts: { count: 2, countedTowardsMax: 1, maxRestarts: 3, lastReason: "Disruption" } },
  },
];

const NOT_FOUND: Answer = [404, { code: "not_found", message: 'CronTrainJob "weekly-retrain" not found in namespace default' }];

type Answer = [number, unknown];

interface Received {
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/**
 * A local Connect server: answers each method (by its name, e.g. GetCronTrainJob) with the
 * [status, JSON] given for it and keeps what it was sent. With loseFirst, the first request
 * arrives but its answer is lost.
 */
class Fake {
  readonly received: Received[] = [];
  url = "";
  private server: Server;

  constructor(answers: Record<string, Answer>, loseFirst = false) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const path = req.url ?? "";
        const method = path.split("/").at(-1) ?? "";
        this.received.push({ path, method, headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString() || "{}") });
        if (loseFirst && this.received.length === 1) {
          req.socket.destroy();
          return;
        }
        const [status, answer] = answers[method] ?? [404, { code: "unimplemented", message: path }];
        const data = Buffer.from(JSON.stringify(answer));
        res.writeHead(status, { "Content-Type": "application/json", "Content-Length": data.length }).end(data);
      });
    });
  }

  bodies(method: string): Record<string, unknown>[] {
    return this.received.filter((r) => r.method === method).map((r) => r.body);
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

async function withFake<T>(answers: Record<string, Answer>, f: (c: TrainerClient, s: Fake) => Promise<T>, loseFirst = false): Promise<T> {
  const s = await new Fake(answers, loseFirst).start();
  try {
    return await f(new TrainerClient({ server: s.url, token: "t0ken", namespace: "default", configFile: "/nonexistent/kiln.yaml" }), s);
  } finally {
    await s.close();
  }
}

const utc = (iso: string) => new Date(iso);
const weekly = (): Answer => [200, { cronTrainJob: WEEKLY }];

test("scheduleOf decodes the server's answer", () => {
  const s = scheduleOf(fromJson(v1.CronTrainJobSchema, WEEKLY as JsonObject));
  assert.deepEqual([s.name, s.namespace, s.schedule, s.timeZone, s.concurrencyPolicy, s.suspend], ["weekly-retrain", "default", "0 2 * * 0", "Europe/Berlin", "Forbid", false]);
  // int64 from a JSON string, int32 as a number; a limit of 0 is kept, not taken as unset.
  assert.deepEqual([s.startingDeadlineSeconds, s.successfulJobsHistoryLimit, s.failedJobsHistoryLimit], [3600, 2, 0]);
  assert.deepEqual([s.runtime, s.image, s.numNodes, s.queue, s.activeDeadlineSeconds], ["torch-distributed", "ghcr.io/kiln-ml/retrain:1.4", 4, "default", 43200]);
  assert.deepEqual(s.active, ["weekly-retrain-29921820"]);
  assert.deepEqual(s.lastScheduleTime, utc("2026-11-22T01:00:00Z"));
  assert.deepEqual(s.lastSuccessfulTime, utc("2026-11-15T09:12:31.250Z"));
  assert.deepEqual(s.nextScheduleTime, utc("2026-11-29T01:00:00Z")); // 02:00+01:00
  assert.equal(s.nextScheduleTime?.getUTCDay(), 0);
  assert.deepEqual(s.creationTimestamp, utc("2026-11-20T09:30:00Z"));
  assert.deepEqual(s.labels, { team: "nlp" });
  assert.equal(s.raw.uid, WEEKLY.uid);
});

test("scheduleOf: unset fields", () => {
  // Suspended, never run, no limits set: undefined, not 0; an unset policy is Allow.
  const s = scheduleOf(fromJson(v1.CronTrainJobSchema, { name: "nightly", spec: { schedule: "@daily", suspend: true } }));
  assert.deepEqual([s.concurrencyPolicy, s.suspend, s.timeZone, s.runtime, s.numNodes], ["Allow", true, "", "", 0]);
  for (const k of ["startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit", "activeDeadlineSeconds", "lastScheduleTime", "lastSuccessfulTime", "nextScheduleTime", "creationTimestamp"] as const) {
    assert.equal(s[k], undefined, k);
  }
  assert.deepEqual([s.active, s.labels], [[], {}]);
  for (const [wire, want] of [["CONCURRENCY_POLICY_ALLOW", "Allow"], ["CONCURRENCY_POLICY_REPLACE", "Replace"]]) {
    assert.equal(scheduleOf(fromJson(v1.CronTrainJobSchema, { spec: { concurrencyPolicy: wire } })).concurrencyPolicy, want);
  }
});

test("createSchedule sends the schedule and its run", async () => {
  await withFake({ CreateCronTrainJob: weekly() }, async (c, srv) => {
    const s = await c.createSchedule({
      name: "weekly-retrain",
      schedule: "0 2 * * 0",
      runtime: "torch-distributed",
      trainer: { image: "ghcr.io/kiln-ml/retrain:1.4", command: ["torchrun", "retrain.py"], numNodes: 4, resourcesPerNode: { "nvidia.com/gpu": 8 }, env: { EPOCHS: "3" } },
      initializer: { dataset: "hf://tatsu-lab/alpaca" },
      timeZone: "Europe/Berlin",
      concurrencyPolicy: "Forbid",
      startingDeadlineSeconds: 3600,
      successfulJobsHistoryLimit: 2,
      failedJobsHistoryLimit: 0,
      queue: "default",
      priorityClass: "low",
      activeDeadlineSeconds: 12 * 3600,
      ttlSecondsAfterFinished: 7 * 86400,
      labels: { team: "nlp" },
      annotations: { owner: "ana" },
      runLabels: { kind: "retrain" },
      requestId: "sched-1",
    });
    assert.equal(s.name, "weekly-retrain");
    assert.deepEqual(s.nextScheduleTime, utc("2026-11-29T01:00:00Z"));
    assert.equal(srv.received.length, 1);
    const got = srv.received[0];
    assert.equal(got.path, SERVICE + "CreateCronTrainJob");
    assert.equal(got.headers["content-type"], "application/json");
    assert.equal(got.headers["authorization"], "Bearer t0ken");
    assert.deepEqual(got.body, {
      namespace: "default",
      cronTrainJob: {
        name: "weekly-retrain",
        labels: { team: "nlp" },
        annotations: { owner: "ana" },
        spec: {
          schedule: "0 2 * * 0",
          timeZone: "Europe/Berlin",
          concurrencyPolicy: "CONCURRENCY_POLICY_FORBID",
          startingDeadlineSeconds: "3600",
          successfulJobsHistoryLimit: 2,
          failedJobsHistoryLimit: 0,
          trainJob: {
            labels: { kind: "retrain" },
            spec: {
              runtime: "torch-distributed",
              image: "ghcr.io/kiln-ml/retrain:1.4",
              command: ["torchrun", "retrain.py"],
              env: [{ name: "EPOCHS", value: "3" }],
              nodes: 4,
              resourcesPerNode: { requests: { "nvidia.com/gpu": "8" }, limits: { "nvidia.com/gpu": "8" } },
              datasetUri: "hf://tatsu-lab/alpaca",
              queue: "default",
              priorityClass: "low",
              activeDeadlineSeconds: "43200",
              ttlSecondsAfterFinished: 604800,
            },
          },
        },
      },
      requestId: "sched-1",
    });
  });
});

test("createSchedule builds each run as train builds a job", async () => {
  const runtime: RuntimeInfo = { name: "team-runtime", namespace: "default", framework: "torch", image: "", numNodes: 1, cluster: false, deprecated: false, steps: [], raw: {} as never };
  const run = {
    runtime,
    trainer: { command: ["python", "-m", "retrain"], args: ["--epochs", "3"], numNodes: 2, numProcsPerNode: 4, resourcesPerNode: { cpu: 4, memory: "16Gi" } },
    initializer: { dataset: "hf://d", model: "hf://m" },
    queue: "q",
    activeDeadlineSeconds: 60,
    ttlSecondsAfterFinished: 0,
  };
  await withFake({ CreateCronTrainJob: weekly(), CreateTrainJob: [200, { trainJob: { name: "team-runtime-x" } }] }, async (c, srv) => {
    await c.createSchedule({ name: "s", schedule: "@daily", ...run });
    await c.train(run);
    const sched = (srv.bodies("CreateCronTrainJob")[0] as any).cronTrainJob.spec.trainJob.spec;
    assert.equal(srv.received[1].path, "/kiln.v1.TrainJobService/CreateTrainJob");
    const job = (srv.received[1].body as any).trainJob.spec;
    assert.deepEqual(sched, job);
    assert.equal(sched.runtimeKind, "RUNTIME_KIND_NAMESPACED");
    assert.equal(sched.ttlSecondsAfterFinished, 0);
  });
});

test("createSchedule defaults: Allow, a random request id; suspend is the schedule's", async () => {
  await withFake({ CreateCronTrainJob: weekly() }, async (c, srv) => {
    await c.createSchedule({ name: "s", schedule: "@hourly", runtime: "torch-distributed", suspend: true, namespace: "team-a" });
    const body = srv.received[0].body;
    assert.equal(body.namespace, "team-a");
    assert.deepEqual(body.cronTrainJob, {
      name: "s",
      spec: { schedule: "@hourly", concurrencyPolicy: "CONCURRENCY_POLICY_ALLOW", suspend: true, trainJob: { spec: { runtime: "torch-distributed" } } },
    });
    assert.match(String(body.requestId), /^[0-9a-f]{32}$/);
  });
});

test("concurrencyPolicy in any case", async () => {
  await withFake({ CreateCronTrainJob: weekly() }, async (c, srv) => {
    for (const p of ["replace", "FORBID", "allow"] as const) await c.createSchedule({ name: "s", schedule: "@daily", runtime: "torch-distributed", concurrencyPolicy: p });
    assert.deepEqual(
      srv.bodies("CreateCronTrainJob").map((b: any) => b.cronTrainJob.spec.concurrencyPolicy),
      ["CONCURRENCY_POLICY_REPLACE", "CONCURRENCY_POLICY_FORBID", "CONCURRENCY_POLICY_ALLOW"],
    );
  });
});

test("bad arguments throw before any request", async () => {
  await withFake({ CreateCronTrainJob: weekly() }, async (c, srv) => {
    const o = { name: "s", schedule: "@daily", runtime: "torch-distributed" };
    for (const bad of ["Sometimes", "", null, 2]) {
      await assert.rejects(
        c.createSchedule({ ...o, concurrencyPolicy: bad as never }),
        (e: unknown) => e instanceof TypeError && /^concurrencyPolicy .*: want one of Allow, Forbid, Replace/.test(e.message),
        String(bad),
      );
    }
    await assert.rejects(c.createSchedule({ ...o, concurrencyPolicy: "Sometimes" as never }), /concurrencyPolicy Sometimes: want one of Allow, Forbid, Replace/);
    await assert.rejects(c.createSchedule({ ...o, runtime: "" }), /runtime: name the runtime/);
    await assert.rejects(c.createSchedule({ ...o, trainer: { numNodes: 0 } }), /trainer.numNodes: want a whole number of at least 1, got 0/);
    assert.deepEqual(srv.received, []);
  });
});

test("createSchedule retries a lost answer with the same request id", async () => {
  await withFake(
    { CreateCronTrainJob: weekly() },
    async (c, srv) => {
      assert.equal((await c.createSchedule({ name: "weekly-retrain", schedule: "0 2 * * 0", runtime: "torch-distributed" })).name, "weekly-retrain");
      const ids = srv.bodies("CreateCronTrainJob").map((b) => b.requestId);
      assert.equal(ids.length, 2);
      assert.equal(ids[0], ids[1]);
      assert.match(String(ids[0]), /^[0-9a-f]{32}$/);
    },
    true,
  );
});

test("triggerSchedule returns the run", async () => {
  await withFake({ TriggerCronTrainJob: [200, { trainJob: RUNS[0], replayed: false }] }, async (c, srv) => {
    assert.equal(await c.triggerSchedule("weekly-retrain"), "weekly-retrain-m4k2p");
    assert.equal(await c.triggerSchedule("weekly-retrain", "team-a", { requestId: "trig-1" }), "weekly-retrain-m4k2p");
    const [first, second] = srv.bodies("TriggerCronTrainJob");
    assert.deepEqual(Object.keys(first).sort(), ["name", "namespace", "requestId"]);
    assert.deepEqual([first.namespace, first.name], ["default", "weekly-retrain"]);
    assert.match(String(first.requestId), /^[0-9a-f]{32}$/);
    assert.deepEqual(second, { namespace: "team-a", name: "weekly-retrain", requestId: "trig-1" });
  });
});

test("triggerSchedule retries a lost answer with the same request id", async () => {
  await withFake(
    { TriggerCronTrainJob: [200, { trainJob: RUNS[0], replayed: true }] },
    async (c, srv) => {
      assert.equal(await c.triggerSchedule("weekly-retrain"), "weekly-retrain-m4k2p");
      const ids = srv.bodies("TriggerCronTrainJob").map((b) => b.requestId);
      assert.equal(ids.length, 2);
      assert.equal(ids[0], ids[1]);
    },
    true,
  );
});

test("listScheduleRuns", async () => {
  await withFake({ ListCronTrainJobRuns: [200, { trainJobs: RUNS }] }, async (c, srv) => {
    const runs = await c.listScheduleRuns("weekly-retrain");
    assert.deepEqual(srv.received[0].body, { namespace: "default", name: "weekly-retrain" });
    // The server's order, newest first, kept.
    assert.deepEqual(runs.map((r) => [r.name, r.status, r.reason]), [
      ["weekly-retrain-m4k2p", "Queued", "Pending"],
      ["weekly-retrain-29921820", "Complete", "AllJobsCompleted"],
    ]);
    const [queued, done] = runs;
    assert.deepEqual([queued.queue, queued.queuePosition, queued.activeDeadlineSeconds, queued.numNodes], ["default", 2, 43200, 4]);
    assert.deepEqual([done.startTime, done.completionTime], [utc("2026-11-22T01:00:05Z"), utc("2026-11-22T09:12:31Z")]);
    assert.deepEqual(done.labels, { "kiln.dev/cron-train-job": "weekly-retrain" });
    assert.deepEqual(done.creationTimestamp, utc("2026-11-22T01:00:02Z"));
    assert.deepEqual(runs.map((r) => [r.restarts, r.restartsCounted]), [[0, 0], [2, 1]]);
  });
});

test("list, get, suspend, resume, delete", async () => {
  const suspended = { ...WEEKLY, spec: { ...WEEKLY.spec, suspend: true }, status: { active: [] } };
  const answers: Record<string, Answer> = {
    ListCronTrainJobs: [200, { cronTrainJobs: [WEEKLY, { name: "nightly", namespace: "team-b", spec: { schedule: "@daily" } }] }],
    GetCronTrainJob: weekly(),
    SuspendCronTrainJob: [200, { cronTrainJob: suspended }],
    ResumeCronTrainJob: weekly(),
    DeleteCronTrainJob: [200, {}],
  };
  await withFake(answers, async (c, srv) => {
    const listed = await c.listSchedules({ allNamespaces: true, labelSelector: "team=nlp" });
    const got = await c.getSchedule("weekly-retrain");
    const paused = await c.suspendSchedule("weekly-retrain");
    const resumed = await c.resumeSchedule("weekly-retrain", "team-a");
    assert.equal(await c.deleteSchedule("weekly-retrain", undefined, { keepRuns: true }), undefined);
    assert.deepEqual(listed.map((s) => [s.namespace, s.name]), [["default", "weekly-retrain"], ["team-b", "nightly"]]);
    assert.deepEqual(got.nextScheduleTime, utc("2026-11-29T01:00:00Z"));
    assert.deepEqual([paused.suspend, paused.nextScheduleTime, paused.active], [true, undefined, []]);
    assert.deepEqual([resumed.suspend, resumed.nextScheduleTime], [false, utc("2026-11-29T01:00:00Z")]);
    assert.deepEqual(srv.received.map((r) => [r.method, r.body]), [
      ["ListCronTrainJobs", { namespace: "default", allNamespaces: true, labelSelector: "team=nlp" }],
      ["GetCronTrainJob", { namespace: "default", name: "weekly-retrain" }],
      ["SuspendCronTrainJob", { namespace: "default", name: "weekly-retrain" }],
      ["ResumeCronTrainJob", { namespace: "team-a", name: "weekly-retrain" }],
      ["DeleteCronTrainJob", { namespace: "default", name: "weekly-retrain", keepRuns: true }],
    ]);
  });
});

test("getSchedule: not found", async () => {
  await withFake({ GetCronTrainJob: NOT_FOUND, DeleteCronTrainJob: NOT_FOUND }, async (c, srv) => {
    await assert.rejects(c.getSchedule("weekly-retrain"), (e: unknown) => e instanceof NotFoundError && e.code === "not_found" && e.message.includes('"weekly-retrain" not found'));
    await assert.rejects(c.deleteSchedule("weekly-retrain"), (e: unknown) => e instanceof NotFoundError);
    assert.deepEqual(srv.bodies("DeleteCronTrainJob"), [{ namespace: "default", name: "weekly-retrain" }]);
  });
});

test("the caller's trace context (TRACEPARENT) reaches the server", async () => {
  const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  await withFake({ GetCronTrainJob: weekly() }, async (c, srv) => {
    process.env.TRACEPARENT = traceparent;
    process.env.TRACESTATE = "kiln=1";
    try {
      await c.getSchedule("weekly-retrain");
    } finally {
      delete process.env.TRACEPARENT;
      delete process.env.TRACESTATE;
    }
    await c.getSchedule("weekly-retrain");
    const [first, second] = srv.received.map((r) => r.headers);
    assert.deepEqual([first.traceparent, first.tracestate], [traceparent, "kiln=1"]);
    assert.equal(second.traceparent, undefined);
  });
});

test("convertManifests sends the sources with the options and returns results and warnings", async () => {
  const answer: Answer = [
    200,
    {
      manifests: [{ kind: "TrainJob", name: "mnist", source: "PyTorchJob/mnist", manifest: "kind: TrainJob\n" }],
      warnings: [{ source: "PyTorchJob/mnist", field: "spec.runPolicy.backoffLimit", message: "not carried over" }],
    },
  ];
  await withFake({ ConvertManifests: answer }, async (c, srv) => {
    const res = await c.convertManifests("kind: PyTorchJob\n", { runtime: "torch-distributed-spot", namespace: "team-b" });
    assert.deepEqual(srv.bodies("ConvertManifests"), [{ manifests: "kind: PyTorchJob\n", runtime: "torch-distributed-spot", namespace: "team-b" }]);
    assert.deepEqual(
      res.manifests.map((m) => [m.kind, m.name, m.source]),
      [["TrainJob", "mnist", "PyTorchJob/mnist"]],
    );
    assert.deepEqual(
      res.warnings.map((w) => [w.field, w.note]),
      [["spec.runPolicy.backoffLimit", false]],
    );
  });
});
