// `npm pack` makes the package a user installs: ESM, type declarations, the README; no tests.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

test("npm pack holds the built package and nothing else", () => {
  const dir = fileURLToPath(new URL("../../", import.meta.url));
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts", "--loglevel=error"], { cwd: dir, encoding: "utf8" });
  const [pkg] = JSON.parse(out) as { name: string; files: { path: string }[] }[];
  const files = pkg.files.map((f) => f.path);
  assert.equal(pkg.name, "@kiln-ml/sdk");
  for (const want of ["package.json", "README.md", "dist/src/index.js", "dist/src/index.d.ts", "dist/src/gen/kiln/v1/trainjob_pb.js"]) {
    assert.ok(files.includes(want), `${want} in ${files.join(", ")}`);
  }
  assert.deepEqual(files.filter((f) => f.startsWith("dist/test/") || f.startsWith("src/") || f.startsWith("node_modules/")), []);
});
