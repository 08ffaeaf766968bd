// @kiln-ml/sdk/browser: nothing of Node.js in its imports, and calls made the way the web
// console's must be (POST, JSON, the Connect header, the token, never cookies).

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { ConfigError, TrainerClient, browserTransport } from "../src/browser.js";

// Every module the browser entry reaches, following relative imports; bare ones are packages.
function reach(file: string, seen = new Set<string>(), packages = new Set<string>()): Set<string> {
  if (seen.has(file)) return packages;
  seen.add(file);
  const src = readFileSync(file, "utf8");
  for (const m of src.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"';]*?(?:from\s*)?["']([^"']+)["']/g)) {
    const spec = m[1];
    if (spec.startsWith(".")) reach(join(dirname(file), spec), seen, packages);
    else packages.add(spec);
  }
  return packages;
}

test("the browser entry imports no Node.js module, directly or through the SDK's own modules", () => {
  const entry = fileURLToPath(new URL("../src/browser.js", import.meta.url));
  const packages = [...reach(entry)];
  assert.ok(packages.includes("@connectrpc/connect-web"), `packages: ${packages.join(", ")}`);
  const node = packages.filter((p) => p.startsWith("node:") || p === "@connectrpc/connect-node" || ["fs", "os", "path", "crypto", "http"].includes(p));
  assert.deepEqual(node, []);
  // The Node.js entry does read the configuration.
  const main = [...reach(fileURLToPath(new URL("../src/index.js", import.meta.url)))];
  assert.ok(main.includes("@connectrpc/connect-node") && main.includes("node:fs"), `packages: ${main.join(", ")}`);
});

test("a browser client's call: POST, JSON, Connect's header, the token of the moment, no cookies", async () => {
  const calls: { url: string; init: RequestInit }[] = [];
  let token = "tok-1";
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    calls.push({ url: String(input), init: init ?? {} });
    return new Response("{}", { status: 200, headers: { "Content-Type": "application/json" } });
  };
  const client = new TrainerClient({ transport: browserTransport({ baseUrl: "https://kiln.example.com", token: () => token, fetch }), namespace: "team-a" });
  assert.equal(client.namespace, "team-a");
  await client.info.getServerInfo({});
  token = "tok-2";
  await client.info.getServerInfo({});
  assert.equal(calls.length, 2);
  const [first, second] = calls;
  assert.equal(first.url, "https://kiln.example.com/kiln.v1.ServerService/GetServerInfo");
  assert.equal(first.init.method, "POST");
  assert.equal(first.init.credentials, "omit");
  const h = new Headers(first.init.headers);
  assert.equal(h.get("content-type"), "application/json");
  assert.equal(h.get("connect-protocol-version"), "1");
  assert.equal(h.get("authorization"), "Bearer tok-1");
  assert.equal(new Headers(second.init.headers).get("authorization"), "Bearer tok-2");
});

test("a client without a transport, where nothing reads a configuration, says what to pass", () => {
  assert.throws(() => new TrainerClient(), (e: unknown) => e instanceof ConfigError && /pass one \(browserTransport/.test(e.message));
});
