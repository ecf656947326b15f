// Drives the sidecar the way the Electron main process does: spawn it, speak JSON-RPC 2.0 over
// its stdio with vscode-jsonrpc and the NDJSON reader/writer, and take it down with shutdown+exit.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import { CancellationTokenSource, ResponseError, createMessageConnection } from "vscode-jsonrpc/node.js";

import { NdjsonMessageReader, NdjsonMessageWriter } from "./ndjson.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, "../..");
const PYTHON =
  process.env.SIDECAR_PYTHON ||
  path.resolve(HERE, process.platform === "win32" ? "../../.venv/Scripts/python.exe" : "../../.venv/bin/python");

const RequestCancelled = -32800;
const ServerNotInitialized = -32002;
const TEST_TIMEOUT = 10_000;

/** Spawn a sidecar on a fresh data dir and wire a vscode-jsonrpc connection to it (not yet listening). */
function startSidecar() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "covalt-node-test-"));
  const child = spawn(
    PYTHON,
    ["-m", "sidecar", "--data-dir", dataDir, "--parent-pid", String(process.pid), "--log-level", "info"],
    { cwd: REPO_ROOT, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, PYTHONUNBUFFERED: "1" } },
  );
  let log = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text) => {
    log += text;
  });
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  let spawnError;
  child.on("error", (error) => {
    spawnError = error;
  });
  const connection = createMessageConnection(new NdjsonMessageReader(child.stdout), new NdjsonMessageWriter(child.stdin));
  // Once the child is gone nothing will answer: reject whatever is still pending instead of hanging.
  exited.then(() => connection.dispose());

  const sidecar = {
    child,
    connection,
    dataDir,
    exited,
    /** The sidecar's stderr so far (its log), plus how it ended if it did. */
    log() {
      const end =
        child.exitCode !== null || child.signalCode !== null
          ? `\n[exited: code ${child.exitCode}, signal ${child.signalCode}]`
          : "";
      const err = spawnError ? `\n[spawn error: ${spawnError.message}]` : "";
      const tail = log.length > 20_000 ? `[... ${log.length - 20_000} chars cut ...]\n${log.slice(-20_000)}` : log;
      return `${tail}${end}${err}`;
    },
    /** Run a test body; on failure, attach the sidecar's log to the error. */
    async check(body) {
      try {
        await body();
      } catch (error) {
        throw new Error(`${error?.message ?? error}\n--- sidecar stderr (${PYTHON}) ---\n${sidecar.log()}`, {
          cause: error,
        });
      }
    },
    /** Make sure the child is gone: close stdin (the sidecar exits on EOF), then SIGKILL after 3 s. */
    async stop() {
      connection.dispose();
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
        child.stdin.end();
        const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
        await exited;
        clearTimeout(timer);
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return sidecar;
}

/** Await a promise that must reject with a ResponseError; returns the error. */
async function rejectsWithResponseError(promise) {
  try {
    const result = await promise;
    assert.fail(`expected a ResponseError, got result ${JSON.stringify(result)}`);
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    assert.ok(error instanceof ResponseError, `expected a ResponseError, got ${error?.stack ?? error}`);
    return error;
  }
}

describe("sidecar over stdio (vscode-jsonrpc + NDJSON)", () => {
  /** @type {ReturnType<typeof startSidecar>} */
  let sc;

  before(() => {
    sc = startSidecar();
    // A server-to-client request, answered the way the UI would.
    sc.connection.onRequest("ui/hello", (params) => ({ echo: params }));
    sc.connection.listen();
  });

  after(async () => {
    await sc?.stop();
  });

  test("initialize returns protocolVersion and serverInfo", { timeout: TEST_TIMEOUT }, () =>
    sc.check(async () => {
      const result = await sc.connection.sendRequest("initialize", {
        clientInfo: { name: "node-test", version: "0.0.0" },
      });
      assert.equal(typeof result.protocolVersion, "string");
      assert.match(result.protocolVersion, /^\d{4}-\d{2}-\d{2}$/);
      assert.equal(result.serverInfo.name, "covalt-sidecar");
      assert.equal(typeof result.serverInfo.version, "string");
    }));

  test("ping returns {}", { timeout: TEST_TIMEOUT }, () =>
    sc.check(async () => {
      assert.deepEqual(await sc.connection.sendRequest("ping"), {});
    }));

  test("cancelling debug/sleep through a CancellationToken answers RequestCancelled", { timeout: TEST_TIMEOUT }, () =>
    sc.check(async () => {
      const source = new CancellationTokenSource();
      const started = Date.now();
      const timer = setTimeout(() => source.cancel(), 100);
      try {
        const error = await rejectsWithResponseError(
          sc.connection.sendRequest("debug/sleep", { ms: 10_000 }, source.token),
        );
        const elapsed = Date.now() - started;
        assert.equal(error.code, RequestCancelled, `code ${error.code}: ${error.message}`);
        assert.ok(elapsed >= 90, `answered after ${elapsed} ms, before the cancel was sent`);
        assert.ok(elapsed < 3_000, `cancel took ${elapsed} ms`);
      } finally {
        clearTimeout(timer);
        source.dispose();
      }
      // The connection is still usable afterwards.
      assert.deepEqual(await sc.connection.sendRequest("ping"), {});
    }));

  test("server-to-client request: debug/roundTrip reaches the client's ui/hello handler", { timeout: TEST_TIMEOUT }, () =>
    sc.check(async () => {
      const result = await sc.connection.sendRequest("debug/roundTrip", { method: "ui/hello", params: { x: 1 } });
      assert.deepEqual(result, { result: { echo: { x: 1 } } });
    }));

  test("shutdown returns null, then exit ends the process with code 0", { timeout: TEST_TIMEOUT }, () =>
    sc.check(async () => {
      assert.equal(await sc.connection.sendRequest("shutdown"), null);
      await sc.connection.sendNotification("exit");
      const { code, signal } = await sc.exited;
      assert.equal(signal, null);
      assert.equal(code, 0);
    }));
});

describe("sidecar before initialize", () => {
  /** @type {ReturnType<typeof startSidecar>} */
  let sc;

  before(() => {
    sc = startSidecar();
    sc.connection.listen();
  });

  after(async () => {
    await sc?.stop();
  });

  test("a request before initialize fails with ServerNotInitialized", { timeout: TEST_TIMEOUT }, () =>
    sc.check(async () => {
      const error = await rejectsWithResponseError(sc.connection.sendRequest("ping"));
      assert.equal(error.code, ServerNotInitialized, `code ${error.code}: ${error.message}`);
    }));
});

describe("NDJSON reader/writer framing", () => {
  function collect() {
    const stream = new PassThrough();
    const reader = new NdjsonMessageReader(stream);
    const messages = [];
    const errors = [];
    let closed = false;
    reader.onError((error) => errors.push(error));
    reader.onClose(() => {
      closed = true;
    });
    reader.listen((message) => messages.push(message));
    return { stream, messages, errors, isClosed: () => closed };
  }

  test("splits lines across and within chunks, tolerates CRLF and blank lines", async () => {
    const { stream, messages, errors, isClosed } = collect();
    const a = { jsonrpc: "2.0", id: 1, result: { text: "héllo ✓" } };
    const b = { jsonrpc: "2.0", method: "$/progress", params: { token: "t", value: { kind: "begin" } } };
    const c = { jsonrpc: "2.0", id: "s1", method: "ui/hello", params: {} };
    const bytes = Buffer.from(`${JSON.stringify(a)}\r\n\n  \r\n${JSON.stringify(b)}\n${JSON.stringify(c)}\n`, "utf8");
    // Split in the middle of a multi-byte character and of a line, then one chunk holding the rest.
    const cut = bytes.indexOf(Buffer.from("é")) + 1;
    stream.write(bytes.subarray(0, cut));
    stream.write(bytes.subarray(cut, cut + 5));
    stream.write(bytes.subarray(cut + 5));
    stream.end();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(messages, [a, b, c]);
    assert.deepEqual(errors, []);
    assert.ok(isClosed());
  });

  test("reports a non-JSON line as an error and goes on", async () => {
    const { stream, messages, errors } = collect();
    stream.write('not json\n{"jsonrpc":"2.0","id":2,"result":null}\n');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(messages, [{ jsonrpc: "2.0", id: 2, result: null }]);
    assert.equal(errors.length, 1);
  });

  test("writer writes one compact JSON object per line", async () => {
    const stream = new PassThrough();
    const writer = new NdjsonMessageWriter(stream);
    await writer.write({ jsonrpc: "2.0", id: 1, method: "ping" });
    await writer.write({ jsonrpc: "2.0", method: "exit" });
    writer.end();
    const text = stream.read().toString("utf8");
    assert.equal(text, '{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","method":"exit"}\n');
  });
});
