import { useEffect, useState } from "preact/hooks";

import { Code, ConnectError, type v1 } from "@kiln-ml/sdk/browser";
import { client, errorText, namespace } from "../api.js";
import { Confirm } from "../components/confirm.js";
import { age, stateName } from "../format.js";
import { repeatUnanswered } from "../retry.js";

const dateOf = (t?: { seconds: bigint }) => (t ? new Date(Number(t.seconds) * 1000) : undefined);

/** When a time falls, in the schedule's own time zone (the browser's when it has none). */
function inZone(d: Date | undefined, tz: string): string {
  if (!d) return "—";
  try {
    return `${d.toLocaleString(undefined, { timeZone: tz || undefined, dateStyle: "medium", timeStyle: "short" })}${tz ? ` (${tz})` : ""}`;
  } catch {
    return d.toLocaleString();
  }
}

export function SchedulesPage({ onUnauthenticated }: { onUnauthenticated: () => void }) {
  const [items, setItems] = useState<v1.CronTrainJob[] | undefined>();
  const [error, setError] = useState("");
  const [ask, setAsk] = useState<{ what: "trigger" | "suspend" | "resume"; name: string } | undefined>();
  const [open, setOpen] = useState("");
  const load = () =>
    client()
      .schedules.listCronTrainJobs({ namespace: namespace() })
      .then((r) => {
        setItems(r.cronTrainJobs);
        setError("");
      })
      .catch((e) => {
        if (ConnectError.from(e).code === Code.Unauthenticated) onUnauthenticated();
        setError(errorText(e));
      });
  useEffect(() => {
    void load();
    const t = setInterval(load, 10_000);
    return () => clearInterval(t);
  }, []);
  const act = async (what: "trigger" | "suspend" | "resume", name: string) => {
    try {
      const req = { namespace: namespace(), name };
      if (what === "trigger") {
        const r = await client().schedules.triggerCronTrainJob(req);
        location.hash = `#/jobs/${encodeURIComponent(r.trainJob?.name ?? "")}`;
        return;
      }
      // Suspending and resuming are safe to repeat (running one now is not): a call the
      // network lost on the way is made again.
      if (what === "suspend") await repeatUnanswered(() => client().schedules.suspendCronTrainJob(req));
      else await repeatUnanswered(() => client().schedules.resumeCronTrainJob(req));
      await load();
    } catch (e) {
      setError(`${what} ${name}: ${errorText(e)}`);
    }
  };
  return (
    <section>
      <h1>Schedules</h1>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {items && !items.length && <p class="empty">No schedules in {namespace()}. Create one: kiln schedules create nightly --schedule "0 2 * * *" -- torchrun train.py</p>}
      {items && items.length > 0 && (
        <table class="plain">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Schedule</th>
              <th scope="col">Next run</th>
              <th scope="col">Last run</th>
              <th scope="col">Active runs</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {items.map((s) => [
              <tr key={s.name} data-schedule={s.name}>
                <td>
                  <button type="button" class="quiet" aria-expanded={open === s.name} onClick={() => setOpen(open === s.name ? "" : s.name)}>
                    {s.name}
                  </button>
                </td>
                <td>
                  <code>{s.spec?.schedule}</code>
                  {s.spec?.suspend ? " (suspended)" : ""}
                </td>
                <td>{s.spec?.suspend ? "—" : inZone(dateOf(s.status?.nextScheduleTime), s.spec?.timeZone ?? "")}</td>
                <td>{inZone(dateOf(s.status?.lastScheduleTime), s.spec?.timeZone ?? "")}</td>
                <td>
                  {(s.status?.active ?? []).map((n) => (
                    <a key={n} href={`#/jobs/${encodeURIComponent(n)}`}>
                      {n}{" "}
                    </a>
                  ))}
                </td>
                <td class="actions">
                  <button type="button" data-action="trigger" onClick={() => setAsk({ what: "trigger", name: s.name })}>
                    Run now
                  </button>
                  <button type="button" onClick={() => setAsk({ what: s.spec?.suspend ? "resume" : "suspend", name: s.name })}>
                    {s.spec?.suspend ? "Resume" : "Suspend"}
                  </button>
                </td>
              </tr>,
              open === s.name && (
                <tr key={`${s.name}-runs`}>
                  <td colSpan={6}>
                    <Runs name={s.name} />
                  </td>
                </tr>
              ),
            ])}
          </tbody>
        </table>
      )}
      <Confirm
        open={!!ask}
        title={ask ? `${{ trigger: "Run", suspend: "Suspend", resume: "Resume" }[ask.what]} ${ask.name}${ask.what === "trigger" ? " now" : ""}?` : ""}
        body={
          ask?.what === "trigger"
            ? "A run starts now, outside the schedule; it counts for the concurrency policy and the history."
            : ask?.what === "suspend"
              ? "No run starts until it is resumed; runs already going go on."
              : "Runs start again at their times."
        }
        action={ask ? { trigger: "Run now", suspend: "Suspend", resume: "Resume" }[ask.what] : ""}
        onAnswer={(yes) => {
          const a = ask;
          setAsk(undefined);
          if (yes && a) void act(a.what, a.name);
        }}
      />
    </section>
  );
}

/** A schedule's runs, newest first: scheduled, triggered, still active or kept by its history limits. */
function Runs({ name }: { name: string }) {
  const [runs, setRuns] = useState<v1.TrainJob[] | undefined>();
  const [error, setError] = useState("");
  useEffect(() => {
    client()
      .schedules.listCronTrainJobRuns({ namespace: namespace(), name })
      .then((r) => setRuns([...r.trainJobs].sort((a, b) => Number((b.createTime?.seconds ?? 0n) - (a.createTime?.seconds ?? 0n)))))
      .catch((e) => setError(errorText(e)));
  }, [name]);
  if (error) return <p class="error">{error}</p>;
  if (!runs) return <p class="empty">Loading the runs of {name}…</p>;
  if (!runs.length) return <p class="empty">No runs yet.</p>;
  const now = Date.now();
  return (
    <ul class="runs" aria-label={`Runs of ${name}`}>
      {runs.map((j) => {
        const st = stateName(j.status?.state ?? 0);
        return (
          <li key={j.name}>
            <a href={`#/jobs/${encodeURIComponent(j.name)}`}>{j.name}</a> <span class={`state state-${st.toLowerCase()}`}>{st}</span>{" "}
            <span class="muted">{age(dateOf(j.createTime), now)} ago</span>
          </li>
        );
      })}
    </ul>
  );
}
