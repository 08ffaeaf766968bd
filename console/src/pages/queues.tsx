import { useEffect, useState } from "preact/hooks";

import { Code, ConnectError, type v1 } from "@kiln-ml/sdk/browser";
import { client, errorText, namespace } from "../api.js";

export function QueuesPage({ onUnauthenticated }: { onUnauthenticated: () => void }) {
  const [queues, setQueues] = useState<v1.Queue[] | undefined>();
  const [error, setError] = useState("");
  useEffect(() => {
    const load = () =>
      client()
        .queues.listQueues({ namespace: namespace() })
        .then((r) => {
          setQueues(r.queues);
          setError("");
        })
        .catch((e) => {
          if (ConnectError.from(e).code === Code.Unauthenticated) onUnauthenticated();
          setError(errorText(e));
        });
    void load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, []);
  return (
    <section>
      <h1>Queues</h1>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {queues && !queues.length && <p class="empty">No queues in {namespace()}: jobs start as soon as they are submitted.</p>}
      {queues?.map((q) => (
        <article class="card" key={q.name}>
          <h2>
            {q.name} <span class="muted">→ {q.clusterQueue}</span> {!q.active && <span class="state state-failed">inactive</span>}
          </h2>
          {q.message && <p class="note">{q.message}</p>}
          <p>
            {q.pending} pending · {q.reserving} reserving · {q.admitted} admitted
          </p>
          {q.quota.length > 0 && (
            <table class="plain">
              <thead>
                <tr>
                  <th scope="col">Flavor</th>
                  <th scope="col">Resource</th>
                  <th scope="col">Used</th>
                  <th scope="col">Quota</th>
                </tr>
              </thead>
              <tbody>
                {q.quota.map((f) => (
                  <tr key={`${f.flavor}/${f.resource}`}>
                    <td>{f.flavor}</td>
                    <td>{f.resource}</td>
                    <td>{f.used || "0"}</td>
                    <td>{f.nominal}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </article>
      ))}
    </section>
  );
}
