// Words and numbers as the kiln CLI prints them: ages, durations, ETAs, states.

import { v1 } from "@kiln-ml/sdk/browser";

/** A duration in seconds as the CLI writes it: 45s, 12m, 3h20m, 2d4h. */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return `${Math.floor(s / 3600)}h${m ? `${m}m` : ""}`;
  }
  const h = Math.floor((s % 86400) / 3600);
  return `${Math.floor(s / 86400)}d${h ? `${h}h` : ""}`;
}

/** How long ago t was, from now (ms since the epoch). */
export function age(t: Date | undefined, now: number): string {
  return t ? duration((now - t.getTime()) / 1000) : "—";
}

/** A state's word, as the CLI's STATUS column says it. */
export function stateName(s: v1.State): string {
  switch (s) {
    case v1.State.QUEUED:
      return "Queued";
    case v1.State.SUSPENDED:
      return "Suspended";
    case v1.State.RUNNING:
      return "Running";
    case v1.State.COMPLETE:
      return "Complete";
    case v1.State.FAILED:
      return "Failed";
    default:
      return "Created";
  }
}

export const STATE_NAMES = ["Created", "Queued", "Running", "Suspended", "Complete", "Failed"] as const;

/** A metric's value, short: 0.5321, 1.2e-5, 1234. */
export function metricValue(v: string): string {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n)) return v;
  if (Number.isInteger(n)) return String(n);
  const a = Math.abs(n);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return n.toExponential(2);
  return n.toPrecision(4).replace(/\.?0+$/, "");
}

/**
 * Where Kueue's topology-aware scheduling put each pod set of a job, as kiln describe says it:
 * "node: 4 pods in block b0, rack b0-r1" (its nodes are in the pods' table), or across how many
 * domains of a level ("2 racks (b0-r1, b1-r0)").
 */
export function placements(p: v1.Placement | undefined): string[] {
  if (!p) return [];
  const levels = p.levels;
  return p.podSets.map((ps) => {
    const where: string[] = [];
    levels.forEach((l, i) => {
      if (i === levels.length - 1 && levels.length > 1) return;
      const values = [...new Set(ps.domains.map((d) => d.values[i] ?? "").filter((v) => v))];
      if (values.length === 1) where.push(`${l.name} ${values[0]}`);
      else if (values.length > 1) where.push(`${values.length} ${l.name}s (${values.join(", ")})`);
    });
    return `${ps.name}: ${ps.count} pods${where.length ? ` in ${where.join(", ")}` : ""}`;
  });
}

/** What topology a job asks for: "one rack, required" ("" for none). */
export function topologyAsked(t: v1.TopologyRequest | undefined): string {
  if (!t?.level) return "";
  return `one ${t.level}, ${t.preferred ? "preferred" : "required"}`;
}
