// Which jobs the list shows: by state, queue, runtime, labels and name.

import type { v1 } from "@kiln-ml/sdk/browser";
import { stateName } from "./format.js";

export interface Filter {
  /** State words (Running, Queued, ...); empty: all. */
  states: string[];
  queue: string;
  runtime: string;
  /** key=value, key!=value or key, comma-separated, as kubectl's -l. */
  labels: string;
  /** A part of the name. */
  text: string;
}

export const noFilter: Filter = { states: [], queue: "", runtime: "", labels: "", text: "" };

type Requirement = (labels: Record<string, string>) => boolean;

/** The label selector's requirements, or the error naming the part that is wrong. */
export function parseLabels(sel: string): Requirement[] | string {
  const out: Requirement[] = [];
  for (const raw of sel.split(",")) {
    const part = raw.trim();
    if (!part) continue;
    const m = /^([A-Za-z0-9._/-]+)\s*(!=|==|=)?\s*([A-Za-z0-9._-]*)$/.exec(part);
    if (!m) return `labels: cannot read "${part}": write key=value, key!=value or key`;
    const [, key, op, value] = m;
    if (!op) out.push((l) => key in l);
    else if (op === "!=") out.push((l) => l[key] !== value);
    else out.push((l) => l[key] === value);
  }
  return out;
}

/** The jobs f keeps, newest first. */
export function filterJobs(jobs: Iterable<v1.TrainJob>, f: Filter): v1.TrainJob[] {
  const reqs = parseLabels(f.labels);
  const labelOk = typeof reqs === "string" ? () => true : (l: Record<string, string>) => reqs.every((r) => r(l));
  const text = f.text.trim().toLowerCase();
  const out: v1.TrainJob[] = [];
  for (const j of jobs) {
    if (f.states.length && !f.states.includes(stateName(j.status?.state ?? 0))) continue;
    if (f.queue && (j.spec?.queue ?? "") !== f.queue) continue;
    if (f.runtime && (j.spec?.runtime ?? "") !== f.runtime) continue;
    if (text && !j.name.toLowerCase().includes(text)) continue;
    if (!labelOk(j.labels)) continue;
    out.push(j);
  }
  const created = (j: v1.TrainJob) => (j.createTime ? Number(j.createTime.seconds) : 0);
  return out.sort((a, b) => created(b) - created(a) || a.name.localeCompare(b.name));
}
