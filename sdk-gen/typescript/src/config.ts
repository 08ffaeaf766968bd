// The client configuration every Kiln client reads: the kiln CLI's file and KILN_*
// environment variables, with the CLI's rules (api/clientconfig). The file is the YAML the
// CLI writes; this reads that subset (a mapping of scalars and one list of flat mappings)
// and refuses anything else with its line.

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import { ConfigError } from "./errors.js";

export { ConfigError };

/** One API server and the credentials to call it with. */
export interface Context {
  name: string;
  server: string;
  certificateAuthority: string;
  token: string;
  tokenFile: string;
  namespace: string;
}

const keys: Record<string, keyof Context> = {
  name: "name",
  server: "server",
  "certificate-authority": "certificateAuthority",
  token: "token",
  "token-file": "tokenFile",
  namespace: "namespace",
};

/** Where the configuration lives unless KILN_CONFIG says otherwise. */
export function defaultPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KILN_CONFIG) return env.KILN_CONFIG;
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "kiln", "config.yaml");
}

interface File {
  currentContext: string;
  contexts: Record<string, string>[];
}

/** Parse the configuration file's text. */
export function parse(text: string, path: string): File {
  const cfg: File = { currentContext: "", contexts: [] };
  let inContexts = false;
  let item: Record<string, string> | undefined;
  let itemIndent = -1;
  text.split(/\r?\n/).forEach((raw, i) => {
    const n = i + 1;
    const line = stripComment(raw);
    if (!line.trim() || line.trim() === "---") return;
    const m = /^( *)(- +)?([A-Za-z0-9_-]+):(?: +(.*?))?\s*$/.exec(line);
    if (!m) throw new ConfigError(`${path}:${n}: cannot read '${raw.trim()}': write \`key: value\` (the CLI writes this file with \`kiln config set-context\`)`);
    const [, sp, dash, key, value] = m;
    const indent = sp.length;
    if (indent === 0 && !dash) {
      inContexts = false;
      item = undefined;
      if (key === "contexts") {
        if (value && value !== "[]") throw new ConfigError(`${path}:${n}: contexts: want a list of contexts, one \`- name: ...\` each`);
        inContexts = true;
      } else if (key === "current-context") {
        cfg.currentContext = scalar(value ?? "", path, n);
      } else {
        throw new ConfigError(`${path}:${n}: unknown key '${key}' (want current-context or contexts)`);
      }
      return;
    }
    if (!inContexts) throw new ConfigError(`${path}:${n}: unexpected indentation`);
    if (dash) {
      item = {};
      cfg.contexts.push(item);
      itemIndent = indent + dash.length;
    } else if (!item || indent !== itemIndent) {
      throw new ConfigError(`${path}:${n}: unexpected indentation in contexts`);
    }
    if (!(key in keys)) throw new ConfigError(`${path}:${n}: unknown context key '${key}' (want one of ${Object.keys(keys).sort().join(", ")})`);
    item![key] = scalar(value ?? "", path, n);
  });
  return cfg;
}

function stripComment(line: string): string {
  let quote = "";
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) quote = "";
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === "#" && (i === 0 || line[i - 1] === " " || line[i - 1] === "\t")) {
      return line.slice(0, i).trimEnd();
    }
  }
  return line;
}

function scalar(value: string, path: string, n: number): string {
  const v = value.trim();
  if (v.length >= 2 && v[0] === "'" && v.endsWith("'")) return v.slice(1, -1).replaceAll("''", "'");
  if (v.length >= 2 && v[0] === '"' && v.endsWith('"')) {
    try {
      return String(JSON.parse(v));
    } catch {
      throw new ConfigError(`${path}:${n}: cannot read the quoted value ${v}`);
    }
  }
  if ("[{|>&*!".includes(v.slice(0, 1)) && v) throw new ConfigError(`${path}:${n}: '${v}': want a plain or quoted string`);
  return v;
}

/** The context a client uses: `context` (else KILN_CONTEXT, else the file's current
 * context), with the KILN_* variables applied over it. */
export function resolve(path?: string, context?: string, env: NodeJS.ProcessEnv = process.env): Context {
  const file = path || defaultPath(env);
  let cfg: File = { currentContext: "", contexts: [] };
  try {
    cfg = parse(readFileSync(file, "utf8"), file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
      if (e instanceof ConfigError) throw e;
      throw new ConfigError(`reading Kiln configuration: ${(e as Error).message}`);
    }
  }
  const name = context || env.KILN_CONTEXT || cfg.currentContext;
  const out: Context = { name: "", server: "", certificateAuthority: "", token: "", tokenFile: "", namespace: "" };
  if (name) {
    const found = cfg.contexts.find((c) => c.name === name);
    if (!found && !env.KILN_SERVER) {
      throw new ConfigError(`context '${name}' is not in the Kiln configuration ${file}: list them with \`kiln config get-contexts\``);
    }
    for (const [k, v] of Object.entries(found ?? {})) out[keys[k]] = v;
  }
  if (env.KILN_TOKEN_FILE) {
    out.token = "";
    out.tokenFile = env.KILN_TOKEN_FILE;
  }
  if (env.KILN_SERVER) out.server = env.KILN_SERVER;
  if (env.KILN_TOKEN) out.token = env.KILN_TOKEN;
  if (env.KILN_NAMESPACE) out.namespace = env.KILN_NAMESPACE;
  if (env.KILN_CA_FILE) out.certificateAuthority = env.KILN_CA_FILE;
  if (!out.server) {
    throw new ConfigError(`no Kiln API server configured: run \`kiln config set-context\` or set KILN_SERVER (configuration file: ${file})`);
  }
  return out;
}
