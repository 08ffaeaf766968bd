// A job's progress and metrics on the wire: what the client sends, and what it makes of the
// server's answers, against a local Connect server that answers as the API server does (unary
// calls in JSON, streams in Connect's envelopes).

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fromJson, type JsonObject } from "@bufbuild/protobuf";

import { PermissionDeniedError, TrainerClient, UnimplementedError, jobOf, v1, type MetricPoint } from "../src/index.js";

const T0 = Date.parse("2026-11-23T12:00:00Z");

// A running job's progress as the API server answers it: 45% at step 450 of 1000, a checkpoint
// at step 400, a progress deadline of 15 minutes.
const PROGRESS = {
  percent: 45,
  etaSeconds: 190,
  metrics: [
    { name: "step", value: "450" },
    { name: "total_steps", value: "1000" },
    { name: "loss", value: "0.5321" },
  ],
  updateTime: "2026-11-23T12:00:00Z",
  step: "450",
  totalSteps: "1000",
  checkpoint: { step: "400", path: "s3://ckpt/llm/step-400" },
  progressDeadlineSeconds: "900",
  stallTime: "2026-11-23T12:15:00Z",
};

const at = (s: number) => new Date(T0 + s * 1000).toISOString();

/** The loss series at those seconds after T0, each at step 10 times it (int64: a JSON string). */
const loss = (...seconds: number[]) => ({
  name: "loss",
  stride: "1",
  points: seconds.map((s) => ({ time: at(s), step: String(10 * s), value: 3 - s / 10 })),
});

const points = (...seconds: number[]): MetricPoint[] => seconds.map((s) => ({ time: new Date(T0 + s * 1000), step: 10 * s, value: 3 - s / 10 }));

const history = (...series: unknown[]) => ({ history: { series } });
const newPoints = (...series: unknown[]) => ({ points: { series } });
const FINISHED = { finished: { state: "STATE_COMPLETE", reason: "AllJobsCompleted" } };

type Answer = [number, unknown];

/** A stream's messages, then its end (an error, or none); with drop, no end: the connection breaks. */
interface Stream {
  messages: unknown[];
  end?: { code: string; message: string };
  drop?: boolean;
}

interface Received {
  method: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/**
 * A local Connect server: a unary method (by name) answers the [status, JSON] given for it; the
 * n-th call of a streaming method answers streams[n]. It keeps what it was sent.
 */
class Fake {
  readonly received: Received[] = [];
  url = "";
  private server: Server;

  constructor(answers: Record<string, Answer>, streams: Stream[] = []) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const method = (req.url ?? "").split("/").at(-1) ?? "";
        const streaming = req.headers["content-type"] === "application/connect+json";
        let body = Buffer.concat(chunks);
        if (streaming) body = body.subarray(5); // one enveloped request
        this.received.push({ method, headers: req.headers, body: JSON.parse(body.toString() || "{}") });
        if (!streaming) {
          const [status, answer] = answers[method] ?? [404, { code: "unimplemented", message: req.url }];
          const data = Buffer.from(JSON.stringify(answer));
          res.writeHead(status, { "Content-Type": "application/json", "Content-Length": data.length }).end(data);
          return;
        }
        const n = this.received.filter((r) => r.method === method).length - 1;
        const s = streams[n] ?? { messages: [], end: { code: "internal", message: "no more streams" } };
        const frames = s.messages.map((m) => envelope(0, m));
        if (s.drop) {
          // The messages, then the connection breaks in the middle of the response.
          res.writeHead(200, { "Content-Type": "application/connect+json" });
          res.write(Buffer.concat(frames), () => setTimeout(() => req.socket.destroy(), 20));
          return;
        }
        frames.push(envelope(2, s.end ? { error: s.end } : {}));
        const data = Buffer.concat(frames);
        res.writeHead(200, { "Content-Type": "application/connect+json", "Content-Length": data.length }).end(data);
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

function envelope(flags: number, msg: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

async function withFake<T>(answers: Record<string, Answer>, streams: Stream[], f: (c: TrainerClient, s: Fake) => Promise<T>): Promise<T> {
  const s = await new Fake(answers, streams).start();
  try {
    return await f(new TrainerClient({ server: s.url, token: "t0ken", namespace: "default", configFile: "/nonexistent/kiln.yaml" }), s);
  } finally {
    await s.close();
  }
}

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

test("jobOf: a reporting job's progress", () => {
  const j = jobOf(fromJson(v1.TrainJobSchema, { name: "llm", status: { state: "STATE_RUNNING", progress: PROGRESS } } as JsonObject));
  const p = j.progress!;
  assert.deepEqual([p.percent, p.etaSeconds, p.step, p.totalSteps], [45, 190, 450, 1000]);
  // In the trainer's order, as reported (strings).
  assert.deepEqual(Object.entries(p.metrics), [["step", "450"], ["total_steps", "1000"], ["loss", "0.5321"]]);
  assert.deepEqual(j.metrics, p.metrics);
  assert.deepEqual(p.updateTime, new Date(T0));
  assert.deepEqual(p.checkpoint, { step: 400, path: "s3://ckpt/llm/step-400" });
  assert.deepEqual([p.progressDeadlineSeconds, p.stallTime], [900, new Date(T0 + 15 * 60 * 1000)]);
});

test("jobOf: a job that reported little or nothing", () => {
  const quiet = jobOf(fromJson(v1.TrainJobSchema, { name: "quiet", status: { state: "STATE_RUNNING" } }));
  assert.deepEqual([quiet.progress, quiet.metrics], [undefined, {}]);
  // Steps only: no percent, no ETA, no checkpoint, no deadline: undefined, not 0.
  const p = jobOf(fromJson(v1.TrainJobSchema, { status: { progress: { step: "1200", metrics: [{ name: "step", value: "1200" }] } } })).progress!;
  assert.deepEqual([p.percent, p.etaSeconds, p.step, p.totalSteps, p.checkpoint, p.progressDeadlineSeconds, p.stallTime], [
    undefined, undefined, 1200, undefined, undefined, undefined, undefined,
  ]);
});

test("getJobMetrics", async () => {
  const lr = { name: "learning_rate", stride: "2", points: [{ time: at(1), value: 0.0003 }] };
  await withFake({ GetTrainJobMetrics: [200, { series: [loss(1, 2, 3), lr], reports: "3", updateTime: at(3) }] }, [], async (c, srv) => {
    const got = await c.getJobMetrics("llm", { metrics: ["loss", "learning_rate"] });
    assert.deepEqual(got, { loss: points(1, 2, 3), learning_rate: [{ time: new Date(T0 + 1000), step: undefined, value: 0.0003 }] });
    assert.deepEqual(srv.bodies("GetTrainJobMetrics"), [{ namespace: "default", name: "llm", metrics: ["loss", "learning_rate"] }]);
    assert.equal(srv.received[0].headers["authorization"], "Bearer t0ken");
  });
});

test("getJobMetrics of a job without history, and from an older server", async () => {
  await withFake({ GetTrainJobMetrics: [200, {}] }, [], async (c, srv) => {
    assert.deepEqual(await c.getJobMetrics("llm", { namespace: "team-a" }), {});
    assert.deepEqual(srv.bodies("GetTrainJobMetrics"), [{ namespace: "team-a", name: "llm" }]);
  });
  await withFake({}, [], async (c) => {
    await assert.rejects(c.getJobMetrics("llm"), UnimplementedError);
  });
});

test("watchJobMetrics: the history, then each report, until the job finishes", async () => {
  await withFake({}, [{ messages: [history(loss(1, 2)), newPoints(loss(3)), newPoints(loss(4)), FINISHED] }], async (c, srv) => {
    assert.deepEqual(await all(c.watchJobMetrics("llm", { metrics: ["loss"] })), [{ loss: points(1, 2) }, { loss: points(3) }, { loss: points(4) }]);
    assert.deepEqual(srv.bodies("WatchTrainJobMetrics"), [{ namespace: "default", name: "llm", metrics: ["loss"] }]);
    assert.equal(srv.received[0].headers["content-type"], "application/connect+json");
  });
});

test("watchJobMetrics resumes a dropped stream, yielding only what is new", async () => {
  const streams: Stream[] = [
    { messages: [history(loss(1, 2)), newPoints(loss(3))], drop: true },
    { messages: [], end: { code: "unavailable", message: "server shutting down" } },
    // The history again, resampled meanwhile: point 2 is gone, 4 is new.
    { messages: [history(loss(1, 3, 4)), FINISHED] },
  ];
  await withFake({}, streams, async (c, srv) => {
    assert.deepEqual(await all(c.watchJobMetrics("llm")), [{ loss: points(1, 2) }, { loss: points(3) }, { loss: points(4) }]);
    assert.equal(srv.bodies("WatchTrainJobMetrics").length, 3);
  });
});

test("watchJobMetrics: an empty history comes first", async () => {
  await withFake({}, [{ messages: [history(), FINISHED] }], async (c) => {
    assert.deepEqual(await all(c.watchJobMetrics("llm")), [{}]);
  });
});

test("watchJobMetrics: an error that retrying does not mend", async () => {
  await withFake({}, [{ messages: [], end: { code: "permission_denied", message: "may not get trainjobmetrics" } }], async (c, srv) => {
    await assert.rejects(all(c.watchJobMetrics("llm")), (e: unknown) => e instanceof PermissionDeniedError && e.message.includes("may not get trainjobmetrics"));
    assert.equal(srv.bodies("WatchTrainJobMetrics").length, 1);
  });
});

test("watchJobMetrics stops when the caller does", async () => {
  await withFake({}, [{ messages: [history(loss(1)), newPoints(loss(2)), FINISHED] }], async (c, srv) => {
    for await (const pts of c.watchJobMetrics("llm")) {
      assert.deepEqual(pts, { loss: points(1) });
      break;
    }
    assert.equal(srv.bodies("WatchTrainJobMetrics").length, 1);
  });
});
