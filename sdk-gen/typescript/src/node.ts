// Node.js: clients read the Kiln configuration, as the kiln CLI does (the file `make up`
// writes, KILN_* variables), and talk over node:http with its CA and token file. The
// package's main entry point imports this module; a browser bundle never does.

import { readFileSync } from "node:fs";
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

import { setConnector, type ClientOptions, type Connection } from "./client.js";
import { resolve, type Context } from "./config.js";
import { ConfigError } from "./errors.js";

function connect(opts: ClientOptions): Connection {
  let ctx: Context;
  if (opts.server || opts.transport) {
    try {
      ctx = resolve(opts.configFile, opts.context);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      ctx = { name: "", server: "", certificateAuthority: "", token: "", tokenFile: "", namespace: "" };
    }
    ctx.server = opts.server ?? ctx.server;
  } else {
    ctx = resolve(opts.configFile, opts.context);
  }
  if (opts.token !== undefined) [ctx.token, ctx.tokenFile] = [opts.token, ""];
  if (opts.tokenFile !== undefined) [ctx.token, ctx.tokenFile] = ["", opts.tokenFile];
  if (opts.caFile !== undefined) ctx.certificateAuthority = opts.caFile;
  return { namespace: opts.namespace || ctx.namespace || "default", server: ctx.server, transport: opts.transport ?? connectTransport(ctx) };
}

function connectTransport(ctx: Context): Transport {
  const auth: Interceptor = (next) => async (req) => {
    let token = ctx.token;
    if (!token && ctx.tokenFile) {
      try {
        token = readFileSync(ctx.tokenFile, "utf8").trim();
      } catch (e) {
        throw new ConnectError(`reading the token file (token-file or KILN_TOKEN_FILE): ${(e as Error).message}`, Code.Unauthenticated);
      }
    }
    if (token) req.header.set("Authorization", `Bearer ${token}`);
    // The caller's W3C trace context (OpenTelemetry's environment carriers): the API server
    // continues that trace, and the operator's spans for a job it creates join it.
    const traceparent = process.env.TRACEPARENT;
    if (traceparent && !req.header.has("traceparent")) {
      req.header.set("traceparent", traceparent);
      if (process.env.TRACESTATE) req.header.set("tracestate", process.env.TRACESTATE);
    }
    return next(req);
  };
  let url: URL;
  try {
    url = new URL(ctx.server);
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error();
  } catch {
    throw new ConfigError(`server '${ctx.server}': want a URL such as https://kiln.example.com or http://127.0.0.1:18090`);
  }
  let ca: Buffer | undefined;
  if (ctx.certificateAuthority) {
    try {
      ca = readFileSync(ctx.certificateAuthority);
    } catch (e) {
      throw new ConfigError(`reading certificate-authority: ${(e as Error).message}`);
    }
  }
  return createConnectTransport({
    baseUrl: ctx.server,
    httpVersion: "1.1",
    // JSON, as the Python SDK speaks it: readable in a proxy's log, and the same recorded
    // exchanges test both.
    useBinaryFormat: false,
    interceptors: [auth],
    nodeOptions: ca ? { ca } : {},
  });
}

setConnector(connect);
