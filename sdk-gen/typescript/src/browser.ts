// @kiln-ml/sdk/browser: the same client in a browser (Kiln's web console uses it), over the
// Fetch API, with no Node.js module anywhere in its imports.
//
//   import { TrainerClient, browserTransport } from "@kiln-ml/sdk/browser";
//   const client = new TrainerClient({ transport: browserTransport({ token: () => sessionStorage.getItem("token") }), namespace: "team-a" });
//   for await (const ev of client.jobs.watchTrainJobs({ namespace: "team-a" })) { ... }
//
// Every call is a POST carrying Connect-Protocol-Version and a JSON content type: a page of
// another origin cannot make one without a CORS preflight, which the API server refuses.

import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import { ConfigError } from "./errors.js";

export * from "./client.js";
export * from "./errors.js";
/** Connect's error and codes, for callers that look at a call's failure. */
export { Code, ConnectError } from "@connectrpc/connect";
/** The API's generated messages, enums and service descriptors (package kiln.v1). */
export * as v1 from "./v1.js";

export interface BrowserTransportOptions {
  /** The API server's URL; by default the page's own origin (the console is served by it). */
  baseUrl?: string;
  /** The bearer token of each call, read again for every call (undefined: none). */
  token?: () => string | undefined | null;
  /** More interceptors, after the token's. */
  interceptors?: Interceptor[];
  /** The fetch to call (tests). */
  fetch?: typeof globalThis.fetch;
}

/** A Connect transport over the Fetch API: JSON, POST only, credentials never sent by the browser on its own. */
export function browserTransport(o: BrowserTransportOptions = {}): Transport {
  const auth: Interceptor = (next) => async (req) => {
    const token = o.token?.();
    if (token) req.header.set("Authorization", `Bearer ${token}`);
    return next(req);
  };
  const f = o.fetch ?? globalThis.fetch.bind(globalThis);
  const origin = (globalThis as { location?: { origin?: string } }).location?.origin;
  const baseUrl = o.baseUrl ?? origin;
  if (!baseUrl) throw new ConfigError("browserTransport: no baseUrl, and no page whose origin to call (outside a browser, give baseUrl)");
  return createConnectTransport({
    baseUrl,
    useBinaryFormat: false,
    useHttpGet: false,
    interceptors: [auth, ...(o.interceptors ?? [])],
    // Never cookies: the token in the header is the only credential.
    fetch: (input, init) => f(input, { ...init, credentials: "omit" }),
  });
}
