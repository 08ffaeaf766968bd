// A local HTTP server that answers with exchanges recorded from a real Kiln API server
// (sdk-gen/testdata/wire, written by sdk-gen/testdata/record.py) and keeps what it was sent.

import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Exchange {
  request: { path: string; contentType: string; body: Record<string, unknown> };
  response: { status: number; contentType: string; bodyBase64: string };
}

export function load(name: string): Exchange {
  return JSON.parse(readFileSync(new URL(`../../../testdata/wire/${name}.json`, import.meta.url), "utf8"));
}

export interface Received {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export class Replay {
  readonly received: Received[] = [];
  url = "";
  private server: Server;
  private exchanges: Exchange[];

  /** names are recorded exchanges' names, or exchanges changed by the test. */
  constructor(names: (string | Exchange)[], loseFirst = false) {
    this.exchanges = names.map((n) => (typeof n === "string" ? load(n) : n));
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.received.push({ path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) });
        if (loseFirst && this.received.length === 1) {
          // The request arrived; its answer is lost on the way back.
          req.socket.destroy();
          return;
        }
        const i = this.exchanges.findIndex((e) => e.request.path === req.url);
        if (i < 0) {
          res.writeHead(404).end();
          return;
        }
        const [ex] = this.exchanges.splice(i, 1);
        const data = Buffer.from(ex.response.bodyBase64, "base64");
        res.writeHead(ex.response.status, { "Content-Type": ex.response.contentType, "Content-Length": data.length }).end(data);
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}
