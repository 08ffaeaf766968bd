// Builds Kiln's web console into apiserver/internal/console/dist, which the API server embeds:
// hashed assets under assets/, and an index.html with no inline script or style (the page's
// Content-Security-Policy allows none). Fails when the first load's JavaScript, gzipped,
// is over its budget.
//
//   node build.mjs            the production build (make console)
//   node build.mjs --tests    the unit tests, bundled for node --test into dist-test/
//   node build.mjs --dev      rebuild on change and reload the page, at http://127.0.0.1:8000,
//                             calling the API server of KILN_API (default: the local platform's)

import * as esbuild from "esbuild";
import { createServer, request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "apiserver", "internal", "console", "dist");
const budget = 300 * 1024; // gzipped JavaScript of the first load

const common = {
  bundle: true,
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
  // The SDK's sources; the packages they import (Connect, protobuf) are the SDK's, found by
  // the console's own imports of them too: one copy of each in the bundle.
  alias: { "@kiln-ml/sdk/browser": join(here, "..", "sdk-gen", "typescript", "src", "browser.ts") },
  nodePaths: [join(here, "..", "sdk-gen", "typescript", "node_modules")],
  logLevel: "warning",
};

function app(dev) {
  return {
    ...common,
    entryPoints: { main: join(here, "src", "main.tsx") },
    outdir: join(out, "assets"),
    entryNames: dev ? "[name]" : "[name]-[hash]",
    assetNames: "[name]-[hash]",
    format: "esm",
    minify: !dev,
    sourcemap: dev ? "inline" : false,
    legalComments: "none",
    metafile: true,
    define: { DEV: String(dev) },
    loader: { ".css": "css" },
  };
}

// index.html names the entry's script and stylesheet; everything else is loaded by them.
function page(meta) {
  const outputs = Object.entries(meta.outputs).filter(([, o]) => o.entryPoint);
  const js = outputs.find(([f]) => f.endsWith(".js"))?.[0];
  const css = outputs.map(([f, o]) => o.cssBundle).find(Boolean);
  const url = (f) => "/" + relative(out, join(here, f)).split("\\").join("/");
  const tags = [css && `<link rel="stylesheet" href="${url(css)}" />`, `<script type="module" src="${url(js)}"></script>`].filter(Boolean).join("\n    ");
  const html = readFileSync(join(here, "src", "index.html"), "utf8").replace("<!-- styles and script: filled in by build.mjs -->", tags);
  writeFileSync(join(out, "index.html"), html);
  copyFileSync(join(here, "src", "favicon.svg"), join(out, "favicon.svg"));
  return { js: join(here, js), css: css && join(here, css) };
}

function clean() {
  mkdirSync(out, { recursive: true });
  for (const f of readdirSync(out)) if (f !== ".gitkeep") rmSync(join(out, f), { recursive: true, force: true });
}

const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;

async function build() {
  clean();
  const res = await esbuild.build(app(false));
  const { js, css } = page(res.metafile);
  const jsGz = gzipSync(readFileSync(js), { level: 9 }).length;
  const cssGz = css ? gzipSync(readFileSync(css), { level: 9 }).length : 0;
  console.log(`console: ${relative(join(here, ".."), out)}: first load ${kib(jsGz)} of JavaScript and ${kib(cssGz)} of CSS, gzipped (budget ${kib(budget)} of JavaScript)`);
  if (jsGz > budget) {
    console.error(`console: the first load's JavaScript is ${kib(jsGz)} gzipped, over the budget of ${kib(budget)}: look at what grew (esbuild --analyze)`);
    process.exit(1);
  }
}

async function tests() {
  const dir = join(here, "dist-test");
  rmSync(dir, { recursive: true, force: true });
  const entries = readdirSync(join(here, "test")).filter((f) => f.endsWith(".test.ts")).map((f) => join(here, "test", f));
  await esbuild.build({ ...common, entryPoints: entries, outdir: dir, platform: "node", format: "esm", outExtension: { ".js": ".mjs" }, define: { DEV: "false" } });
}

// The dev loop: esbuild rebuilds on change and tells the page (/esbuild); everything else
// goes to the API server, so the page calls it as the embedded console does: same origin.
async function dev() {
  const api = new URL(process.env.KILN_API || "http://127.0.0.1:18090");
  clean();
  const ctx = await esbuild.context({
    ...app(true),
    plugins: [{ name: "page", setup: (b) => b.onEnd((r) => r.metafile && page(r.metafile)) }],
  });
  await ctx.watch();
  const { port } = await ctx.serve({ servedir: out, host: "127.0.0.1" });
  const proxy = (req, res, target) => {
    const send = target.protocol === "https:" ? httpsRequest : httpRequest;
    const up = send({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host }, rejectUnauthorized: false }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on("error", (e) => {
      res.writeHead(502, { "Content-Type": "text/plain" });
      res.end(`the API server at ${target} did not answer: ${e.message} (make up, or set KILN_API)\n`);
    });
    req.pipe(up);
  };
  createServer((req, res) => {
    const path = req.url ?? "/";
    if (path === "/esbuild" || path.startsWith("/assets/") || path === "/favicon.svg" || path === "/" || path === "/index.html") {
      proxy(req, res, new URL(`http://127.0.0.1:${port}`));
    } else proxy(req, res, api);
  }).listen(8000, "127.0.0.1", () => console.log(`console: http://127.0.0.1:8000 (API: ${api}); edit console/src and the page reloads`));
}

const arg = process.argv[2];
if (arg === "--dev") await dev();
else if (arg === "--tests") await tests();
else if (arg === undefined) await build();
else {
  console.error(`build.mjs: unknown argument ${arg} (want --dev, --tests or nothing)`);
  process.exit(2);
}
