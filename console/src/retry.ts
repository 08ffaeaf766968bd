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

/**
 * Reads a stream until `signal` aborts, opening it again after a wait that starts at 500 ms,
 * doubles up to 10 s and starts over with each message (`read` calls the `got` it is given on
 * each). A failure goes to `failed`, which says whether to open it again; a stream that ends
 * is opened again only with `reopenAtEnd` (a watch; logs and metrics of a finished job end).
 */
export async function keepReading(
  signal: AbortSignal,
  read: (got: () => void) => Promise<void>,
  {
    failed,
    reopenAtEnd = false,
    sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms)),
  }: { failed: (e: unknown) => boolean; reopenAtEnd?: boolean; sleep?: (ms: number) => Promise<void> },
): Promise<void> {
  let backoff = 500;
  while (!signal.aborted) {
    try {
      await read(() => {
        backoff = 500;
      });
      if (!reopenAtEnd || signal.aborted) return;
    } catch (e) {
      if (signal.aborted || !failed(e)) return;
    }
    await sleep(backoff);
    backoff = Math.min(backoff * 2, 10_000);
  }
}
