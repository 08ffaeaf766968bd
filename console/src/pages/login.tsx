import { useState } from "preact/hooks";

import { TrainerClient, browserTransport } from "@kiln-ml/sdk/browser";
import { errorText, setToken } from "../api.js";

/** Sign in with a bearer token: checked by the API server before it is kept. */
export function LoginPage({ onSignedIn }: { onSignedIn: (user: string) => void }) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = (new FormData(e.currentTarget as HTMLFormElement).get("token") as string).trim();
    if (!t) {
      setError("Paste a token: your Kiln configuration's (kiln config view --raw shows it), or kubectl -n <namespace> create token <service-account>.");
      return;
    }
    setBusy(true);
    setError("");
    try {
      const probe = new TrainerClient({ transport: browserTransport({ token: () => t }) });
      const info = await probe.info.getServerInfo({});
      setToken(t);
      onSignedIn(info.user);
    } catch (err) {
      setError(`The API server refused this token: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="login">
      <h1>Kiln</h1>
      <form onSubmit={submit}>
        <label for="token">Bearer token</label>
        <p class="hint">
          It stays in this tab only, and every call runs as its user. Your Kiln configuration's: <code>kiln config view --raw</code> shows it
          (after <code>make up</code>: ServiceAccount <code>default/kiln-demo</code>'s, in <code>bin/platform/kiln/config.yaml</code>); or a
          fresh one: <code>kubectl -n &lt;namespace&gt; create token &lt;service-account&gt;</code>.
        </p>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck={false} required />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
