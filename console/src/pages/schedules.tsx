import { useEffect, useState } from "preact/hooks";

import { Code, ConnectError, type v1 } from "@kiln-ml/sdk/browser";
import { client, errorText, namespace } from "../api.js";
import { Confirm } from "../components/confirm.js";

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
      if (what === "suspend") await client().schedules.suspendCronTrainJob(req);
      else await client().schedules.resumeCronTrainJob(req);
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
      {items && !items.length && <p class="empty">No schedules in {namespace()}. Create one: kiln schedule create nightly --schedule "0 2 * * *" -- torchrun train.py</p>}
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
            {items.map((s) => (
              <tr key={s.name}>
                <td>{s.name}</td>
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
                  <button type="button" onClick={() => setAsk({ what: "trigger", name: s.name })}>
                    Run now
                  </button>
                  <button type="button" onClick={() => setAsk({ what: s.spec?.suspend ? "resume" : "suspend", name: s.name })}>
                    {s.spec?.suspend ? "Resume" : "Suspend"}
                  </button>
                </td>
              </tr>
            ))}
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
