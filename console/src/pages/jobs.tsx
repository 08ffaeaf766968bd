import { useEffect, useMemo, useState } from "preact/hooks";

import { Code, type ConnectError } from "@kiln-ml/sdk/browser";
import { client, errorText, namespace } from "../api.js";
import { VirtualRows } from "../components/virtual.js";
import { filterJobs, noFilter, parseLabels, type Filter } from "../filter.js";
import { age, duration, STATE_NAMES, stateName } from "../format.js";
import { emptyJobs, watchJobs } from "../jobs.js";

const ROW = 36;

/** Every job of the namespace, live, filtered. */
export function JobsPage({ onUnauthenticated }: { onUnauthenticated: () => void }) {
  const [set, setSet] = useState(emptyJobs());
  const [error, setError] = useState<ConnectError | undefined>();
  const [filter, setFilter] = useState<Filter>(noFilter);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const ctl = new AbortController();
    void watchJobs(client(), namespace(), ctl.signal, setSet, (e) => {
      setError(e);
      if (e?.code === Code.Unauthenticated) onUnauthenticated();
    });
    const tick = setInterval(() => setNow(Date.now()), 5000);
    return () => {
      ctl.abort();
      clearInterval(tick);
    };
  }, []);
  const jobs = useMemo(() => filterJobs(set.jobs.values(), filter), [set, filter]);
  const queues = useMemo(() => [...new Set([...set.jobs.values()].map((j) => j.spec?.queue ?? "").filter(Boolean))].sort(), [set]);
  const runtimes = useMemo(() => [...new Set([...set.jobs.values()].map((j) => j.spec?.runtime ?? "").filter(Boolean))].sort(), [set]);
  const labelError = typeof parseLabels(filter.labels) === "string" ? (parseLabels(filter.labels) as string) : "";
  const toggle = (s: string) => setFilter({ ...filter, states: filter.states.includes(s) ? filter.states.filter((x) => x !== s) : [...filter.states, s] });
  return (
    <section class="jobs">
      <h1>
        Jobs <span class="count">{set.synced ? `${jobs.length} of ${set.jobs.size}` : "loading…"}</span>
      </h1>
      <div class="filters" role="search">
        <div role="group" aria-label="State">
          {STATE_NAMES.map((s) => (
            <button type="button" class={`chip state-${s.toLowerCase()}`} aria-pressed={filter.states.includes(s)} onClick={() => toggle(s)} key={s}>
              {s}
            </button>
          ))}
        </div>
        <label>
          Queue{" "}
          <select value={filter.queue} onChange={(e) => setFilter({ ...filter, queue: e.currentTarget.value })}>
            <option value="">any</option>
            {queues.map((q) => (
              <option key={q}>{q}</option>
            ))}
          </select>
        </label>
        <label>
          Runtime{" "}
          <select value={filter.runtime} onChange={(e) => setFilter({ ...filter, runtime: e.currentTarget.value })}>
            <option value="">any</option>
            {runtimes.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </label>
        <label>
          Labels{" "}
          <input value={filter.labels} placeholder="team=nlp" aria-invalid={!!labelError} onInput={(e) => setFilter({ ...filter, labels: e.currentTarget.value })} />
        </label>
        <label>
          Name <input type="search" value={filter.text} onInput={(e) => setFilter({ ...filter, text: e.currentTarget.value })} />
        </label>
      </div>
      {labelError && <p class="error">{labelError}</p>}
      {error && (
        <p class="error" role="alert">
          {error.code === Code.PermissionDenied ? `You may not list the jobs of namespace ${namespace()}: ` : "Watching the jobs: "}
          {errorText(error)}
        </p>
      )}
      <div class="table" role="table" aria-label="Jobs" aria-rowcount={jobs.length + 1}>
        <div role="rowgroup">
          <div role="row" aria-rowindex={1} class="row head">
            {["Name", "State", "Progress", "ETA", "Queue", "Runtime", "Nodes", "Age"].map((h) => (
              <span role="columnheader" key={h}>
                {h}
              </span>
            ))}
          </div>
        </div>
        <VirtualRows
          items={jobs}
          id={(j) => j.name}
          rowHeight={ROW}
          label="Jobs"
          row={(j) => {
            const st = stateName(j.status?.state ?? 0);
            const p = j.status?.progress;
            return (
              <>
                <span role="cell" class="name">
                  <a href={`#/jobs/${encodeURIComponent(j.name)}`}>{j.name}</a>
                </span>
                <span role="cell">
                  <span class={`state state-${st.toLowerCase()}`}>{st}</span>
                </span>
                <span role="cell">
                  {p?.percent !== undefined ? (
                    <span class="mini">
                      <progress max={100} value={p.percent} aria-label={`${j.name} progress`} /> {p.percent}%
                    </span>
                  ) : (
                    "—"
                  )}
                </span>
                <span role="cell">{p?.etaSeconds !== undefined && st === "Running" ? duration(p.etaSeconds) : "—"}</span>
                <span role="cell">{j.spec?.queue || "—"}</span>
                <span role="cell">{j.spec?.runtime}</span>
                <span role="cell">{j.spec?.nodes || "—"}</span>
                <span role="cell">{age(j.createTime ? new Date(Number(j.createTime.seconds) * 1000) : undefined, now)}</span>
              </>
            );
          }}
        />
      </div>
      {set.synced && set.jobs.size === 0 && <p class="empty">No jobs in {namespace()} yet. Submit one: kiln submit --runtime torch-distributed -- torchrun train.py</p>}
    </section>
  );
}
