import { useEffect, useState } from "preact/hooks";

import type { v1 } from "@kiln-ml/sdk/browser";
import { client, errorText, namespace } from "../api.js";

export function RuntimesPage() {
  const [runtimes, setRuntimes] = useState<v1.Runtime[] | undefined>();
  const [error, setError] = useState("");
  useEffect(() => {
    client()
      .runtimes.listRuntimes({ namespace: namespace() })
      .then((r) => setRuntimes(r.runtimes))
      .catch((e) => setError(errorText(e)));
  }, []);
  return (
    <section>
      <h1>Runtimes</h1>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {runtimes && (
        <table class="plain">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Framework</th>
              <th scope="col">Nodes</th>
              <th scope="col">Devices per node</th>
              <th scope="col">Image</th>
            </tr>
          </thead>
          <tbody>
            {runtimes.map((r) => (
              <tr key={`${r.namespace}/${r.name}`}>
                <td>
                  {r.name}
                  {r.namespace ? <span class="muted"> ({r.namespace})</span> : ""}
                  {r.deprecated ? <span class="state state-failed"> deprecated</span> : ""}
                </td>
                <td>{r.framework}</td>
                <td>{r.nodes}</td>
                <td>{r.devicesPerNode.map((d) => `${d.count} ${d.resource}`).join(", ") || "—"}</td>
                <td>
                  <code>{r.image}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
