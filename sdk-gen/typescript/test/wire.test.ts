// The Connect wire format, against exchanges recorded from a real Kiln API server.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { InvalidArgumentError, NotFoundError, PermissionDeniedError, TrainerClient, UnavailableError } from "../src/index.js";
import { parse, resolve, ConfigError } from "../src/config.js";
import { Replay, load, type Exchange } from "./replay.js";

async function withReplay<T>(
  names: (string | Exchange)[],
  f: (c: TrainerClient, r: Replay) => Promise<T>,
  loseFirst = false,
  onWarning?: (w: string) => void,
): Promise<T> {
  const r = await new Replay(names, loseFirst).start();
  try {
    return await f(new TrainerClient({ server: r.url, token: "t0ken", namespace: "default", configFile: "/nonexistent/kiln.yaml", onWarning }), r);
  } finally {
    await r.close();
  }
}

test("train sends the request the server answered", async () => {
  await withReplay(["create-ok"], async (c, r) => {
    const name = await c.train({
      runtime: "torch-distributed",
      trainer: { command: ["torchrun", "train.py"], numNodes: 2 },
      queue: "default",
      activeDeadlineSeconds: 28800,
      ttlSecondsAfterFinished: 86400,
      name: "wire-rec",
      requestId: "wire-rec-1",
    });
    assert.equal(name, "wire-rec");
    const got = r.received[0];
    assert.deepEqual(JSON.parse(got.body.toString()), load("create-ok").request.body);
    assert.equal(got.headers["content-type"], "application/json");
    assert.equal(got.headers["connect-protocol-version"], "1");
    assert.equal(got.headers["authorization"], "Bearer t0ken");
  });
});

test("train asks for a topology level", async () => {
  await withReplay(["create-ok"], async (c, r) => {
    await c.train({ runtime: "torch-distributed", name: "wire-rec", queue: "tas", topology: "rack", topologyPreferred: true });
    assert.deepEqual(JSON.parse(r.received[0].body.toString()).trainJob.spec.topology, { level: "rack", preferred: true });
    await assert.rejects(c.train({ runtime: "torch-distributed", topologyPreferred: true }), /topologyPreferred: name the level with topology/);
  });
});

test("train retries a lost answer with the same request id", async () => {
  await withReplay(
    ["create-ok"],
    async (c, r) => {
      assert.equal(await c.train({ runtime: "torch-distributed", name: "wire-rec" }), "wire-rec");
      assert.equal(r.received.length, 2);
      const ids = new Set(r.received.map((x) => JSON.parse(x.body.toString()).requestId));
      assert.equal(ids.size, 1);
    },
    true,
  );
});

test("train hands the server's warnings to onWarning", async () => {
  const ex = load("create-ok");
  const body = JSON.parse(Buffer.from(ex.response.bodyBase64, "base64").toString());
  body.warnings = ['PersistentVolumeClaim "kiln-checkpoints" does not exist in namespace default'];
  ex.response.bodyBase64 = Buffer.from(JSON.stringify(body)).toString("base64");
  const warned: string[] = [];
  await withReplay([ex], async (c) => assert.equal(await c.train({ runtime: "torch-distributed", name: "wire-rec" }), "wire-rec"), false, (w) => warned.push(w));
  assert.deepEqual(warned, body.warnings);
});

test("getJob", async () => {
  await withReplay(["get-complete"], async (c) => {
    const j = await c.getJob("wire-rec");
    assert.deepEqual([j.status, j.reason, j.numNodes, j.activeDeadlineSeconds, j.ttlSecondsAfterFinished, j.queue], ["Complete", "AllJobsCompleted", 2, 28800, 86400, "default"]);
    assert.deepEqual(j.steps.map((s) => [s.name, s.status]), [["node-0", "Succeeded"], ["node-1", "Succeeded"]]);
    assert.ok(j.ttlDeleteTime instanceof Date);
  });
});

test("waitForJobStatus reads the stream", async () => {
  await withReplay(["watch-complete"], async (c, r) => {
    const seen: string[] = [];
    const j = await c.waitForJobStatus("wire-rec", "Complete", { callbacks: [(j) => seen.push(j.status)] });
    assert.equal(j.status, "Complete");
    assert.deepEqual(seen, ["Complete"]);
    assert.equal(r.received[0].headers["content-type"], "application/connect+json");
    const body = r.received[0].body;
    assert.equal(body[0], 0);
    assert.equal(body.readUInt32BE(1), body.length - 5);
  });
});

test("logs, and an error at the end of a stream", async () => {
  await withReplay(["logs", "logs-not-found"], async (c) => {
    const lines: string[] = [];
    for await (const l of c.getJobLogs("wire-rec")) lines.push(l);
    assert.deepEqual([lines[0], lines.at(-1)], ["[kiln-sim] starting training", "[kiln-sim] training complete"]);
    await assert.rejects(async () => {
      for await (const _ of c.getJobLogs("wire-missing", { step: null })) void _;
    }, (e: unknown) => e instanceof NotFoundError && e.code === "not_found" && e.message.includes('"wire-missing" not found'));
  });
});

test("errors: field violations, permission denied", async () => {
  await withReplay(["create-invalid", "list-denied"], async (c) => {
    await assert.rejects(
      c.train({ runtime: "torch-distributed", name: "x".repeat(70), requestId: "wire-rec-2" }),
      (e: unknown) => e instanceof InvalidArgumentError && e.fieldViolations.length === 1 && e.fieldViolations[0].field === "train_job.name",
    );
    await assert.rejects(c.listJobs({ namespace: "kube-system" }), (e: unknown) => e instanceof PermissionDeniedError && /may not list trainjobs/.test(e.message));
  });
});

test("listJobs sends statuses in the Kubeflow SDK's words, and refuses others", async () => {
  await withReplay(["list-denied"], async (c, r) => {
    await assert.rejects(c.listJobs({ status: ["Created", "Running"] }), (e: unknown) => e instanceof PermissionDeniedError);
    const body = JSON.parse(r.received[0].body.toString());
    assert.deepEqual(body.statuses, ["Created", "Running"]);
    assert.equal(body.states, undefined);
    await assert.rejects(c.listJobs({ status: ["Done" as never] }), /status Done: want one of Created, Queued, Running, Suspended, Complete, Failed/);
  });
});

test("an unreachable server is unavailable", async () => {
  const c = new TrainerClient({ server: "http://127.0.0.1:9", token: "t", configFile: "/nonexistent/kiln.yaml" });
  await assert.rejects(c.listQueues(), (e: unknown) => e instanceof UnavailableError);
});

test("bad arguments name the parameter", async () => {
  const c = new TrainerClient({ server: "http://127.0.0.1:9", configFile: "/nonexistent/kiln.yaml" });
  await assert.rejects(c.train({ runtime: "torch-distributed", trainer: { numNodes: 0 } }), /trainer.numNodes: want a whole number of at least 1, got 0/);
  await assert.rejects(c.waitForJobStatus("x", "Done" as never), /status Done: want one of Created, Queued/);
});

test("configuration: the CLI's file and KILN_* variables", () => {
  const dir = mkdtempSync(join(tmpdir(), "kiln-"));
  const path = join(dir, "config.yaml");
  writeFileSync(
    path,
    "contexts:\n- certificate-authority: /ca.crt\n  name: local\n  namespace: default\n  server: https://127.0.0.1:18443\n  token: abc\n" +
      "- name: prod  # shared\n  server: \"https://kiln.example.com\"\n  token-file: '/tok'\ncurrent-context: local\n",
  );
  assert.deepEqual(resolve(path, undefined, {}), { name: "local", server: "https://127.0.0.1:18443", certificateAuthority: "/ca.crt", token: "abc", tokenFile: "", namespace: "default" });
  assert.equal(resolve(path, undefined, { KILN_CONTEXT: "prod" }).tokenFile, "/tok");
  const env = resolve(path, undefined, { KILN_SERVER: "http://127.0.0.1:18090", KILN_TOKEN_FILE: "/t", KILN_NAMESPACE: "ml" });
  assert.deepEqual([env.server, env.token, env.tokenFile, env.namespace], ["http://127.0.0.1:18090", "", "/t", "ml"]);
  assert.throws(() => resolve(join(dir, "missing.yaml"), undefined, {}), /no Kiln API server configured: run `kiln config set-context` or set KILN_SERVER/);
  assert.throws(() => parse("contexts:\n- name: a\n  servr: x\n", "c.yaml"), (e: unknown) => e instanceof ConfigError && /c.yaml:3: unknown context key 'servr'/.test(e.message));
  assert.throws(() => parse("foo: bar\n", "c.yaml"), /c.yaml:1: unknown key 'foo'/);
});
