// The generated protocol types (protocol/ts) compile under --strict, and typecheck.ts, which uses
// the method maps the way the UI would, compiles against them.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TSC = path.join(HERE, "node_modules", "typescript", "bin", "tsc");

test("protocol/ts compiles with tsc --noEmit --strict", { timeout: 60_000 }, () => {
  assert.ok(fs.existsSync(TSC), `${TSC} is missing: run npm ci in tests/node (scripts/test does)`);
  assert.ok(fs.existsSync(path.join(HERE, "../../protocol/ts/index.ts")), "protocol/ts/index.ts is missing");
  const run = spawnSync(
    process.execPath,
    [TSC, "-p", path.join(HERE, "tsconfig.json"), "--noEmit", "--strict", "--pretty", "false"],
    { cwd: HERE, encoding: "utf8", timeout: 55_000 },
  );
  const output = `${run.stdout ?? ""}${run.stderr ?? ""}`.trim();
  assert.equal(run.error, undefined, `tsc did not run: ${run.error}`);
  assert.equal(run.status, 0, `tsc exited with ${run.status} (signal ${run.signal}):\n${output}`);
});
