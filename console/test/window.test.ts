import { test } from "node:test";
import assert from "node:assert/strict";

import { rowsInView } from "../src/window.js";

test("ten thousand rows draw only those in view and a few around them", () => {
  const w = rowsInView(10_000, 36, 36 * 5000, 720, 8);
  assert.equal(w.height, 360_000);
  assert.equal(w.start, 5000 - 8);
  assert.equal(w.end, 5000 + 20 + 1 + 8);
  assert.equal(w.offset, w.start * 36);
  assert.ok(w.end - w.start < 40, `${w.end - w.start} rows drawn`);
});

test("the top and the bottom of the list, and an empty one", () => {
  assert.deepEqual(rowsInView(100, 36, 0, 360, 2), { start: 0, end: 13, offset: 0, height: 3600 });
  const bottom = rowsInView(100, 36, 99_999, 360, 2);
  assert.equal(bottom.end, 100);
  assert.ok(bottom.start <= 90 - 2);
  assert.deepEqual(rowsInView(0, 36, 100, 360), { start: 0, end: 0, offset: 0, height: 0 });
});
