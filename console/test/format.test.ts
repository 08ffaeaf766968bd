import { test } from "node:test";
import assert from "node:assert/strict";

import { v1 } from "@kiln-ml/sdk/browser";
import { age, duration, metricValue, stateName } from "../src/format.js";

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
