// Kiln's web console: the jobs of a namespace, live; a job's progress, curves, logs and
// story; schedules, queues and runtimes. Every call is the signed-in user's own.

import { render } from "preact";
import { useEffect, useState } from "preact/hooks";

import { client, homeNamespace, namespace, setNamespace, setToken, token } from "./api.js";
import { JobPage } from "./pages/job.js";
import { JobsPage } from "./pages/jobs.js";
import { LoginPage } from "./pages/login.js";
import { QueuesPage } from "./pages/queues.js";
import { RuntimesPage } from "./pages/runtimes.js";
import { SchedulesPage } from "./pages/schedules.js";
import "./style.css";

declare const DEV: boolean;

/** The route: the part of the URL after #. */
function useRoute(): string {
  const [route, setRoute] = useState(location.hash.slice(1) || "/");
  useEffect(() => {
    const on = () => setRoute(location.hash.slice(1) || "/");
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}

function useTheme(): [string, () => void] {
  const initial = localStorage.getItem("kiln.theme") || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
  const [theme, set] = useState(initial);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
  }, [theme]);
  return [
    theme,
    () => {
      const next = theme === "dark" ? "light" : "dark";
      localStorage.setItem("kiln.theme", next);
      set(next);
    },
  ];
}

function App() {
  const route = useRoute();
  const [theme, toggleTheme] = useTheme();
  const [signedIn, setSignedIn] = useState(!!token());
  const [user, setUser] = useState("");
  const [ns, setNs] = useState(namespace());

  useEffect(() => {
    if (!signedIn) return;
    client()
      .info.getServerInfo({})
      .then((info) => setUser(info.user))
      .catch(() => undefined);
  }, [signedIn]);

  const signOut = () => {
    setToken(null);
    setSignedIn(false);
    setUser("");
  };
  if (!signedIn) {
    return (
      <LoginPage
        onSignedIn={(u) => {
          if (!sessionStorage.getItem("kiln.namespace")) {
            setNamespace(homeNamespace(u));
            setNs(namespace());
          }
          setUser(u);
          setSignedIn(true);
        }}
      />
    );
  }
  let page;
  const job = /^\/jobs\/([^/]+)$/.exec(route);
  if (job) page = <JobPage key={`${ns}/${job[1]}`} name={decodeURIComponent(job[1])} onUnauthenticated={signOut} />;
  else if (route === "/schedules") page = <SchedulesPage key={ns} onUnauthenticated={signOut} />;
  else if (route === "/queues") page = <QueuesPage key={ns} onUnauthenticated={signOut} />;
  else if (route === "/runtimes") page = <RuntimesPage key={ns} />;
  else page = <JobsPage key={ns} onUnauthenticated={signOut} />;
  const link = (href: string, label: string) => (
    <a href={`#${href}`} aria-current={route === href || (href === "/" && route.startsWith("/jobs")) ? "page" : undefined}>
      {label}
    </a>
  );
  return (
    <>
      <header class="bar">
        <a class="brand" href="#/">
          Kiln
        </a>
        <nav aria-label="Pages">
          {link("/", "Jobs")}
          {link("/schedules", "Schedules")}
          {link("/queues", "Queues")}
          {link("/runtimes", "Runtimes")}
        </nav>
        <form
          class="ns"
          onSubmit={(e) => {
            e.preventDefault();
            const v = (new FormData(e.currentTarget).get("ns") as string).trim();
            if (v) {
              setNamespace(v);
              setNs(v);
            }
          }}
        >
          <label for="ns">Namespace</label>
          <input id="ns" name="ns" value={ns} size={14} autocomplete="off" spellcheck={false} />
        </form>
        <span class="user" title={user}>
          {user.replace(/^system:serviceaccount:/, "")}
        </span>
        <button type="button" class="quiet" data-action="theme" onClick={toggleTheme}>
          {theme === "dark" ? "Light theme" : "Dark theme"}
        </button>
        <button type="button" class="quiet" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main">{page}</main>
    </>
  );
}

render(<App />, document.getElementById("app")!);

if (DEV) new EventSource("/esbuild").addEventListener("change", () => location.reload());
