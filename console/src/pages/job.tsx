import { useEffect, useMemo, useRef, useState } from "preact/hooks";

import { Code, ConnectError, v1 } from "@kiln-ml/sdk/browser";
import { client, errorText, namespace } from "../api.js";
import { MetricChart } from "../components/chart.js";
import { Confirm } from "../components/confirm.js";
import { keepReading, repeatUnanswered, unanswered } from "../retry.js";
import { age, duration, metricValue, placements, stateName, topologyAsked } from "../format.js";

type Series = { xs: number[]; ys: number[]; byStep: boolean };

const seconds = (t?: { seconds: bigint; nanos: number }) => (t ? Number(t.seconds) + t.nanos / 1e9 : 0);
const dateOf = (t?: { seconds: bigint; nanos: number }) => (t ? new Date(seconds(t) * 1000) : undefined);

/** Adds points to the series by name (points after the last one kept). */
function addPoints(into: Map<string, Series>, series: v1.MetricSeries[], replace: boolean): Map<string, Series> {
  const out = new Map(replace ? [] : into);
  for (const s of series) {
    const byStep = s.points.length > 0 && s.points.every((p) => p.step !== undefined);
    const prev = out.get(s.name);
    const cur: Series = replace || !prev ? { xs: [], ys: [], byStep } : { xs: [...prev.xs], ys: [...prev.ys], byStep: prev.byStep };
    for (const p of s.points) {
      // NaN and infinities cannot be plotted: one would blank the chart's scale.
      if (!Number.isFinite(p.value)) continue;
      const x = cur.byStep && p.step !== undefined ? Number(p.step) : seconds(p.time);
      // In order of x, once each: the history read again fills in what the live points skipped.
      let i = cur.xs.length;
      while (i > 0 && cur.xs[i - 1] > x) i--;
      if (i > 0 && cur.xs[i - 1] === x) cur.ys[i - 1] = p.value;
      else {
        cur.xs.splice(i, 0, x);
        cur.ys.splice(i, 0, p.value);
      }
    }
    out.set(s.name, cur);
  }
  return out;
}

export function JobPage({ name, onUnauthenticated }: { name: string; onUnauthenticated: () => void }) {
  const ns = namespace();
  const [job, setJob] = useState<v1.TrainJob | undefined>();
  const [gone, setGone] = useState(false);
  const [error, setError] = useState("");
  const [series, setSeries] = useState<Map<string, Series>>(new Map());
  const [tab, setTab] = useState<"logs" | "events" | "yaml" | "pods">("logs");
  const [ask, setAsk] = useState<"" | "suspend" | "resume" | "delete">("");
  const [actionError, setActionError] = useState("");
  const [now, setNow] = useState(Date.now());
  // Its steps and pods: the watch leaves them out (they cost a list of pods); read every few seconds.
  const [steps, setSteps] = useState<v1.Step[]>([]);
  // The earlier attempts whose logs were kept (a restart, a preemption, the deadline).
  const [kept, setKept] = useState<number[]>([]);

  const fail = (e: unknown) => {
    const err = ConnectError.from(e);
    if (err.code === Code.Unauthenticated) onUnauthenticated();
    else if (err.code === Code.NotFound) setGone(true);
    else setError(errorText(err));
  };

  // The job, live.
  useEffect(() => {
    const ctl = new AbortController();
    void keepReading(
      ctl.signal,
      async (got) => {
        for await (const ev of client().jobs.watchTrainJobs({ namespace: ns, name, heartbeatSeconds: 30 }, { signal: ctl.signal })) {
          if (ev.type === v1.WatchEventType.DELETED) setGone(true);
          else if (ev.trainJob) {
            setJob(ev.trainJob);
            setGone(false);
          }
          got();
          setError("");
        }
      },
      {
        reopenAtEnd: true,
        failed: (e) => {
          fail(e);
          const c = ConnectError.from(e).code;
          return c !== Code.Unauthenticated && c !== Code.PermissionDenied;
        },
      },
    );
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => {
      ctl.abort();
      clearInterval(tick);
    };
  }, [ns, name]);

  useEffect(() => {
    let live = true;
    const load = () =>
      client()
        .jobs.getTrainJob({ namespace: ns, name })
        .then((r) => {
          if (!live) return;
          setSteps(r.trainJob?.status?.steps ?? []);
          const attempts = r.trainJob?.status?.keptLogAttempts ?? [];
          setKept((prev) => (prev.join(",") === attempts.join(",") ? prev : attempts));
        })
        .catch(() => undefined);
    void load();
    const t = setInterval(load, 5000);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [ns, name]);

  // Its metrics: the history, then live points, until it finishes.
  useEffect(() => {
    const ctl = new AbortController();
    // A stream the network cut is opened again: it starts with the whole history.
    void keepReading(
      ctl.signal,
      async (got) => {
        for await (const ev of client().jobs.watchTrainJobMetrics({ namespace: ns, name }, { signal: ctl.signal })) {
          if (ev.event.case === "history") setSeries(addPoints(new Map(), ev.event.value.series, true));
          else if (ev.event.case === "points") {
            const pts = ev.event.value.series;
            setSeries((s) => addPoints(s, pts, false));
          }
          got();
        }
      },
      {
        failed: (e) => {
          if (unanswered(e)) return true;
          if (ConnectError.from(e).code !== Code.NotFound) setError(`Metrics: ${errorText(e)}`);
          return false;
        },
      },
    );
    return () => ctl.abort();
  }, [ns, name]);

  const act = async (what: "suspend" | "resume" | "delete") => {
    setActionError("");
    try {
      // Each is safe to repeat: a call the network lost on the way is made again.
      const req = { namespace: ns, name };
      if (what === "suspend") setJob((await repeatUnanswered(() => client().jobs.suspendTrainJob(req))).trainJob);
      else if (what === "resume") setJob((await repeatUnanswered(() => client().jobs.resumeTrainJob(req))).trainJob);
      else {
        // NotFound on a later attempt: an earlier one deleted it, and only its answer was lost.
        await repeatUnanswered((n) =>
          client()
            .jobs.deleteTrainJob(req)
            .catch((e) => {
              if (n > 0 && ConnectError.from(e).code === Code.NotFound) return undefined;
              throw e;
            }),
        );
        location.hash = "#/";
      }
    } catch (e) {
      setActionError(`${what[0].toUpperCase()}${what.slice(1)} failed: ${errorText(e)}`);
    }
  };

  if (gone) {
    return (
      <section>
        <h1>{name}</h1>
        <p class="empty">
          TrainJob {ns}/{name} does not exist (any more). <a href="#/">All jobs</a>
        </p>
      </section>
    );
  }
  if (!job) {
    return <section>{error ? <p class="error" role="alert">{error}</p> : <p class="empty">Loading {name}…</p>}</section>;
  }
  const st = stateName(job.status?.state ?? 0);
  const p = job.status?.progress;
  const finished = st === "Complete" || st === "Failed";
  const suspended = job.spec?.suspend ?? false;
  const charted = [...series.entries()].filter(([n]) => !["step", "total_steps", "epoch", "checkpoint_step"].includes(n));
  return (
    <section class="job">
      <div class="title">
        <h1>{job.name}</h1>
        <span class={`state state-${st.toLowerCase()}`}>{st}</span>
        <div class="actions">
          {!finished && !suspended && (
            <button type="button" data-action="suspend" onClick={() => setAsk("suspend")}>
              Suspend
            </button>
          )}
          {!finished && suspended && (
            <button type="button" data-action="resume" onClick={() => setAsk("resume")}>
              Resume
            </button>
          )}
          <button type="button" class="danger" data-action="delete" onClick={() => setAsk("delete")}>
            Delete
          </button>
        </div>
      </div>
      {actionError && (
        <p class="error" role="alert">
          {actionError}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {job.status?.message && <p class={st === "Failed" ? "error" : "note"}>{job.status.message}</p>}
      <Summary job={job} now={now} />
      {p && (
        <div class="progress">
          <progress max={100} value={p.percent ?? 0} aria-label="Progress" />
          <span>
            {p.percent !== undefined ? `${p.percent}%` : ""}
            {p.step !== undefined ? ` · step ${p.step}${p.totalSteps !== undefined ? ` of ${p.totalSteps}` : ""}` : ""}
            {p.etaSeconds !== undefined && st === "Running" ? ` · ETA ${duration(p.etaSeconds)}` : ""}
            {p.updateTime ? ` · updated ${age(dateOf(p.updateTime), now)} ago` : ""}
          </span>
          {p.metrics.length > 0 && (
            <dl class="metrics">
              {p.metrics.map((m) => (
                <div key={m.name}>
                  <dt>{m.name}</dt>
                  <dd>{metricValue(m.value)}</dd>
                </div>
              ))}
            </dl>
          )}
          {p.checkpoint && (
            <p class="note">
              Last checkpoint: step {String(p.checkpoint.step)} at <code>{p.checkpoint.path}</code>
            </p>
          )}
        </div>
      )}
      {charted.length > 0 && (
        <div class="charts">
          {charted.map(([n, s]) => (
            <MetricChart key={n} name={n} xs={s.xs} ys={s.ys} byStep={s.byStep} />
          ))}
        </div>
      )}
      <div role="tablist" aria-label="Details" class="tabs">
        {(["logs", "events", "pods", "yaml"] as const).map((t) => (
          <button type="button" role="tab" data-tab={t} aria-selected={tab === t} onClick={() => setTab(t)} key={t}>
            {{ logs: "Logs", events: "Events", pods: "Steps and pods", yaml: "YAML" }[t]}
          </button>
        ))}
      </div>
      <div role="tabpanel">
        {tab === "logs" && <Logs job={job} steps={steps} kept={kept} />}
        {tab === "events" && <Events name={name} />}
        {tab === "pods" && <Pods steps={steps} />}
        {tab === "yaml" && <Yaml name={name} />}
      </div>
      <Confirm
        open={ask !== ""}
        title={`${ask[0]?.toUpperCase() ?? ""}${ask.slice(1)} ${job.name}?`}
        body={
          ask === "delete"
            ? "The job, its pods and its history are deleted. This cannot be undone."
            : ask === "suspend"
              ? "Its pods stop; resuming starts them again (from the last checkpoint, if the trainer keeps one)."
              : "Its pods start again."
        }
        action={`${ask[0]?.toUpperCase() ?? ""}${ask.slice(1)}`}
        danger={ask === "delete"}
        onAnswer={(yes) => {
          const what = ask;
          setAsk("");
          if (yes && what) void act(what);
        }}
      />
    </section>
  );
}

function Summary({ job, now }: { job: v1.TrainJob; now: number }) {
  const s = job.status;
  const q = s?.queue;
  const rows: [string, string][] = [
    ["Runtime", job.spec?.runtime ?? ""],
    ["Nodes", String(job.spec?.nodes || "—")],
    ["Image", job.spec?.image || "(the runtime's)"],
    ["Created", `${age(dateOf(job.createTime), now)} ago`],
  ];
  if (s?.startTime) rows.push(["Started", `${age(dateOf(s.startTime), now)} ago`]);
  if (s?.completionTime) rows.push(["Finished", `${age(dateOf(s.completionTime), now)} ago`]);
  if (s?.deadlineTime) rows.push(["Deadline", dateOf(s.deadlineTime)!.toLocaleString()]);
  if (s?.ttlDeleteTime) rows.push(["Deleted at", dateOf(s.ttlDeleteTime)!.toLocaleString()]);
  if (q?.localQueue) rows.push(["Queue", `${q.localQueue}${q.admitted ? " (admitted)" : q.positionInLocalQueue ? ` (position ${q.positionInLocalQueue})` : ""}`]);
  const asked = topologyAsked(job.spec?.topology);
  if (asked) rows.push(["Topology", asked]);
  for (const where of placements(s?.placement)) rows.push(["Placement", where]);
  if (s?.cluster) rows.push(["Cluster", `${s.cluster} (dispatched by MultiKueue: its pods and logs are there)`]);
  if (s?.restarts?.count) rows.push(["Restarts", `${s.restarts.count}${s.restarts.lastReason ? ` (last: ${s.restarts.lastReason})` : ""}`]);
  return (
    <dl class="summary">
      {rows.map(([k, v], i) => (
        <div key={`${k}-${i}`}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

function Logs({ job, steps: all, kept }: { job: v1.TrainJob; steps: v1.Step[]; kept: number[] }) {
  const names = all.map((s) => s.name).join(",");
  const steps = useMemo(() => (names ? names.split(",") : []), [names]);
  const [step, setStep] = useState("");
  const [follow, setFollow] = useState(true);
  // "" reads the pods of now; a number, the kept logs of that earlier attempt.
  const [attempt, setAttempt] = useState("");
  const [lines, setLines] = useState<string[]>([]);
  const [error, setError] = useState("");
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const ctl = new AbortController();
    setLines([]);
    setError("");
    // A stream the network cut is read again from its tail.
    void keepReading(
      ctl.signal,
      async (got) => {
        const earlier = attempt === "" ? undefined : Number(attempt);
        const stream = client().jobs.streamLogs(
          { namespace: job.namespace, name: job.name, step, follow: follow && earlier === undefined, tailLines: BigInt(2000), attempt: earlier },
          { signal: ctl.signal },
        );
        let first = true;
        for await (const res of stream) {
          if (first) setLines([]);
          first = false;
          got();
          const add = res.lines.map((l) => {
            const where = l.attempt > 0 && earlier === undefined ? `${l.step} attempt ${l.attempt}` : l.step;
            return steps.length > 1 && !step ? `[${where}] ${l.text}` : l.text;
          });
          setLines((prev) => {
            const next = prev.concat(add);
            return next.length > 5000 ? next.slice(next.length - 5000) : next;
          });
        }
      },
      {
        failed: (e) => {
          if (unanswered(e)) return true;
          setError(errorText(e));
          return false;
        },
      },
    );
    return () => ctl.abort();
  }, [job.namespace, job.name, step, follow, attempt]);
  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [lines, follow]);
  return (
    <div class="logs">
      <div class="filters">
        <label>
          Step{" "}
          <select value={step} onChange={(e) => setStep(e.currentTarget.value)}>
            <option value="">all</option>
            {steps.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        {kept.length > 0 && (
          <label>
            Attempt{" "}
            <select value={attempt} onChange={(e) => setAttempt(e.currentTarget.value)}>
              <option value="">now</option>
              {kept.map((a) => (
                <option key={a} value={String(a)}>
                  {a} (kept)
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          <input type="checkbox" checked={follow && attempt === ""} disabled={attempt !== ""} onChange={(e) => setFollow(e.currentTarget.checked)} /> Follow
        </label>
      </div>
      {error && <p class="error">{error}</p>}
      <pre ref={pre} class="log" role="log" tabIndex={0} aria-label="Logs" aria-live="off">
        {lines.length ? lines.join("\n") : "No logs yet."}
      </pre>
    </div>
  );
}

function Events({ name }: { name: string }) {
  const [events, setEvents] = useState<v1.Event[]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    let live = true;
    const load = () =>
      client()
        .jobs.listEvents({ namespace: namespace(), name })
        .then((r) => live && setEvents(r.events))
        .catch((e) => live && setError(errorText(e)));
    void load();
    const t = setInterval(load, 5000);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [name]);
  if (error) return <p class="error">{error}</p>;
  if (!events.length) return <p class="empty">No events.</p>;
  return (
    <table class="plain">
      <thead>
        <tr>
          <th scope="col">Last seen</th>
          <th scope="col">Type</th>
          <th scope="col">Reason</th>
          <th scope="col">Object</th>
          <th scope="col">Message</th>
        </tr>
      </thead>
      <tbody>
        {events.map((e, i) => (
          <tr key={i} class={e.type === "Warning" ? "warn" : ""}>
            <td>{dateOf(e.lastTime)?.toLocaleTimeString() ?? ""}</td>
            <td>{e.type}</td>
            <td>{e.reason}</td>
            <td>{e.object}</td>
            <td>
              {e.message}
              {e.count > 1 ? ` (×${e.count})` : ""}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Pods({ steps }: { steps: v1.Step[] }) {
  if (!steps.length) return <p class="empty">No pods yet.</p>;
  return (
    <table class="plain">
      <thead>
        <tr>
          <th scope="col">Step</th>
          <th scope="col">Pod</th>
          <th scope="col">Phase</th>
          <th scope="col">Node</th>
          <th scope="col">Devices</th>
          <th scope="col">Restarts</th>
        </tr>
      </thead>
      <tbody>
        {steps.map((s) => (
          <tr key={s.name}>
            <td>{s.name}</td>
            <td>{s.pod}</td>
            <td>
              {s.phase}
              {s.reason ? ` (${s.reason})` : ""}
            </td>
            <td>{s.node || "—"}</td>
            <td>{s.devices.map((d) => `${d.count} ${d.resource}`).join(", ") || "—"}</td>
            <td>{s.restarts}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Yaml({ name }: { name: string }) {
  const [text, setText] = useState("");
  useEffect(() => {
    client()
      .jobs.getTrainJob({ namespace: namespace(), name, includeManifest: true })
      .then((r) => setText(r.manifest))
      .catch((e) => setText(`# ${errorText(e)}`));
  }, [name]);
  return (
    <pre class="log" role="region" tabIndex={0} aria-label="YAML">
      {text || "Loading…"}
    </pre>
  );
}
