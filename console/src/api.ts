// The signed-in session: the bearer token (this browser tab's sessionStorage only, never a
// URL or a cookie), the namespace looked at, and the client that calls the API server as
// that user.

import { ConnectError, TrainerClient, browserTransport } from "@kiln-ml/sdk/browser";

const TOKEN = "kiln.token";
const NAMESPACE = "kiln.namespace";

export function token(): string | null {
  return sessionStorage.getItem(TOKEN);
}

export function setToken(t: string | null): void {
  if (t) sessionStorage.setItem(TOKEN, t);
  else sessionStorage.removeItem(TOKEN);
}

export function namespace(): string {
  return sessionStorage.getItem(NAMESPACE) || "default";
}

export function setNamespace(ns: string): void {
  sessionStorage.setItem(NAMESPACE, ns);
}

let current: { ns: string; client: TrainerClient } | undefined;

/** The client for the current namespace, as the signed-in user. */
export function client(): TrainerClient {
  const ns = namespace();
  if (!current || current.ns !== ns) {
    current = { ns, client: new TrainerClient({ transport: browserTransport({ token }), namespace: ns }) };
  }
  return current.client;
}

/** The namespace a user lands in: their ServiceAccount's, else default. */
export function homeNamespace(user: string): string {
  const m = /^system:serviceaccount:([^:]+):/.exec(user);
  return m ? m[1] : "default";
}

/** What to show of a failed call: the server's own words. */
export function errorText(e: unknown): string {
  const err = ConnectError.from(e);
  return err.rawMessage || err.message;
}
