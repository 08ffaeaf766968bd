import { test } from "node:test";
import assert from "node:assert/strict";

import { Code, ConnectError } from "@kiln-ml/sdk/browser";
import { keepReading, repeatUnanswered, unanswered } from "../src/retry.js";

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

test("keeps reading a stream: opened again after a failure it is told of, waiting longer each time until a message", async () => {
  const ctl = new AbortController();
  const waits: number[] = [];
  const failures: unknown[] = [];
  let opened = 0;
  await keepReading(
    ctl.signal,
    async (got) => {
      opened++;
      if (opened === 3) got(); // a message: the next wait starts over
      if (opened === 5) throw new ConnectError("no such job", Code.NotFound);
      throw lost();
    },
    {
      failed: (e) => {
        failures.push(e);
        return unanswered(e);
      },
      sleep: async (ms) => void waits.push(ms),
    },
  );
  assert.equal(opened, 5, "stops at the failure failed() says not to retry");
  assert.equal(failures.length, 5);
  assert.deepEqual(waits, [500, 1000, 500, 1000]);
});

test("a stream that ends is opened again only when asked, and never after the signal aborts", async () => {
  let opened = 0;
  await keepReading(new AbortController().signal, async () => void opened++, { failed: () => true, sleep: async () => undefined });
  assert.equal(opened, 1, "logs of a finished job end");

  const ctl = new AbortController();
  opened = 0;
  const waits: number[] = [];
  await keepReading(
    ctl.signal,
    async () => {
      if (++opened === 7) ctl.abort();
    },
    { reopenAtEnd: true, failed: () => true, sleep: async (ms) => void waits.push(ms) },
  );
  assert.equal(opened, 7);
  assert.deepEqual(waits, [500, 1000, 2000, 4000, 8000, 10_000], "doubling up to 10 s");

  const aborted = new AbortController();
  let told = false;
  await keepReading(
    aborted.signal,
    async () => {
      aborted.abort();
      throw lost();
    },
    { failed: () => (told = true), sleep: async () => undefined },
  );
  assert.equal(told, false, "a stream the page closed is no failure");
});
