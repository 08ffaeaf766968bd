import { test } from "node:test";
import assert from "node:assert/strict";

import { Code, ConnectError } from "@kiln-ml/sdk/browser";
import { repeatUnanswered, unanswered } from "../src/retry.js";

// What connect-web throws when fetch fails: the browser's TypeError, wrapped.
const lost = () => ConnectError.from(new TypeError("Failed to fetch"));

test("a call that got no answer is told from one the server answered", () => {
  assert.equal(unanswered(lost()), true);
  assert.equal(unanswered(new TypeError("Failed to fetch")), true);
  assert.equal(unanswered(new ConnectError("no such job", Code.NotFound)), false);
  assert.equal(unanswered(new ConnectError("refused", Code.Unknown)), false, "an unknown error the server sent is an answer");
  assert.equal(unanswered(new ConnectError("aborted", Code.Canceled)), false);
});

test("repeats a call while it gets no answer, waiting longer each time, and stops at an answer", async () => {
  const waits: number[] = [];
  const attempts: number[] = [];
  const got = await repeatUnanswered(
    async (n) => {
      attempts.push(n);
      if (n < 2) throw lost();
      return "suspended";
    },
    { sleep: async (ms) => void waits.push(ms) },
  );
  assert.equal(got, "suspended");
  assert.deepEqual(attempts, [0, 1, 2]);
  assert.deepEqual(waits, [250, 500]);
});

test("gives up after its tries with the last error, and never repeats a call the server refused", async () => {
  let calls = 0;
  await assert.rejects(
    repeatUnanswered(
      async () => {
        calls++;
        throw lost();
      },
      { tries: 3, sleep: async () => undefined },
    ),
    (e) => unanswered(e),
  );
  assert.equal(calls, 3);
  calls = 0;
  await assert.rejects(
    repeatUnanswered(
      async () => {
        calls++;
        throw new ConnectError("the job is Complete", Code.FailedPrecondition);
      },
      { sleep: async () => undefined },
    ),
    /Complete/,
  );
  assert.equal(calls, 1);
});
