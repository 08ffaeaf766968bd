import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";

import { v1 } from "@kiln-ml/sdk/browser";
import { age, duration, metricValue, placements, stateName, topologyAsked } from "../src/format.js";

test("durations as the CLI writes them", () => {
  assert.equal(duration(0), "0s");
  assert.equal(duration(59.9), "59s");
  assert.equal(duration(60), "1m");
  assert.equal(duration(3600), "1h");
  assert.equal(duration(3600 * 3 + 20 * 60), "3h20m");
  assert.equal(duration(86400 * 2 + 3600 * 4), "2d4h");
  assert.equal(duration(-1), "—");
  assert.equal(duration(Number.NaN), "—");
  assert.equal(age(new Date(1_000_000), 1_000_000 + 90_000), "1m");
  assert.equal(age(undefined, 0), "—");
});

test("states by the CLI's words", () => {
  assert.equal(stateName(v1.State.RUNNING), "Running");
  assert.equal(stateName(v1.State.QUEUED), "Queued");
  assert.equal(stateName(v1.State.UNSPECIFIED), "Created");
});

test("metric values, short", () => {
  assert.equal(metricValue("0.53214567"), "0.5321");
  assert.equal(metricValue("1200"), "1200");
  assert.equal(metricValue("0.0000123"), "1.23e-5");
  assert.equal(metricValue("2.50"), "2.5");
  assert.equal(metricValue("warmup"), "warmup");
});

test("where Kueue placed a job, as kiln describe says it", () => {
  const levels = [
    { name: "block", nodeLabel: "cloud.google.com/gce-topology-block" },
    { name: "rack", nodeLabel: "cloud.google.com/gce-topology-subblock" },
    { name: "host", nodeLabel: "kubernetes.io/hostname" },
  ];
  const p = create(v1.PlacementSchema, {
    topology: "default",
    levels,
    podSets: [
      { name: "node", count: 2, domains: [{ values: ["b0", "b0-r1", "n0"], pods: 1 }, { values: ["b0", "b0-r1", "n1"], pods: 1 }] },
      { name: "spread", count: 3, domains: [{ values: ["b0", "b0-r1", "n0"], pods: 2 }, { values: ["", "", "gone"], pods: 1 }, { values: ["b1", "b1-r0", "n9"], pods: 1 }] },
    ],
  });
  assert.deepEqual(placements(p), ["node: 2 pods in block b0, rack b0-r1", "spread: 3 pods in 2 blocks (b0, b1), 2 racks (b0-r1, b1-r0)"]);
  assert.deepEqual(placements(undefined), []);
  assert.equal(topologyAsked(create(v1.TopologyRequestSchema, { level: "rack" })), "one rack, required");
  assert.equal(topologyAsked(create(v1.TopologyRequestSchema, { level: "block", preferred: true })), "one block, preferred");
  assert.equal(topologyAsked(undefined), "");
});
