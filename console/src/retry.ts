// Calls that got no answer. When the browser loses the connection before the server replies
// (the machine's network changed, a proxy or the server restarted), fetch fails with a
// TypeError and no status: the call may or may not have reached the server.

import { Code, ConnectError } from "@kiln-ml/sdk/browser";

/** Whether the call failed without an answer from the server. */
export function unanswered(e: unknown): boolean {
  const err = ConnectError.from(e);
  return err.code === Code.Unknown && err.cause instanceof TypeError;
}

/**
 * Makes a call that is safe to repeat (setting a state, deleting) again while it gets no
 * answer: up to `tries` times, waiting `delayMs`, then twice as long, between them. An answer,
 * an error included, ends it. `call` is told which attempt it is (0 first), so that a delete
 * can take NotFound on a later attempt for the earlier one having gone through.
 */
export async function repeatUnanswered<T>(
  call: (attempt: number) => Promise<T>,
  { tries = 4, delayMs = 250, sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms)) } = {},
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call(attempt);
    } catch (e) {
      if (attempt + 1 >= tries || !unanswered(e)) throw e;
      await sleep(delayMs * 2 ** attempt);
    }
  }
}
