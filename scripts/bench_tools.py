#!/usr/bin/env python3
"""Benchmark Python tool calls (issue "Toolsets") against references measured in the same run.

    .venv/bin/python scripts/bench_tools.py             full run (under a minute)
    .venv/bin/python scripts/bench_tools.py --quick     smaller run (a smoke test)
    .venv/bin/python scripts/bench_tools.py --calls N   N measured calls per warm series (default 500)
    .venv/bin/python scripts/bench_tools.py --stalls    only section 6 (the longest pings)
    .venv/bin/python scripts/bench_tools.py --cards     only section 7 (card sanitising)
    .venv/bin/python scripts/bench_tools.py --sandbox   only section 8 (the sandbox's cost)

Budgets from ARCHITECTURE.md: a Python tool call through the sidecar, warm worker, small
workspace: p50 <= 15 ms including the snapshot; an idle toolset worker <= 40 MB RSS.

1. Warm Python tool call through the real sidecar (``SidecarClient.spawn``): a small toolset in a
   temp folder (one ``@tool`` function that writes a small file into ``get_context().workspace``
   and returns a small dict) is imported with ``toolsets/import``, a chat is created and its
   workspace seeded with 20 small files, then after a warm-up ``tools/call`` with ``chatId`` runs
   N times in a row; p50/p99 of request -> response. Reference: the same function called in
   this process (SDK on sys.path, ``set_context(ToolContext(...))`` around each call).
                                                                    budget: p50 <= 15 ms
2. The same call without ``chatId`` (a scratch folder, no workspace snapshot), and 3. the built-in
   ``write_file`` in the same chat (no worker hop), so the cost split is visible.        (info)
   ``ping`` through the same client gives the floor of the client and the RPC layer.
   The three tools/call series are interleaved in rounds, so drift hits them alike.
4. Cold start of a toolset worker with the host API (``ToolsetWorkers``): fresh pool -> first
   call's result, median of 10, vs ``python -I -c pass`` spawn -> exit (median of 10); the warm
   ``pool.call`` round trip on the host API alone (the worker hop, no RPC, no database); and the
   idle worker's memory (Pss of the worker, bwrap and the forked child). budget: <= 40 MB
5. ``toolsets/import`` of a generated 100-tool bundle (10 modules; half ``@tool`` functions with
   type hints, half legacy plain functions with a YAML ``input_schema``), each into a fresh id,
   median of 3, vs ``toolsets/inspect`` of the same bundle (nothing installed); from a folder and
   from a ZIP of it.                                                          (info)
6. The event loop around workers: ``ping`` sent back to back (through a bare client that never
   parses a big answer, so the times are the sidecar's) while the sidecar (a) starts a worker
   cold: ``toolsets/import`` (which starts one to describe the tools) and the first call after a
   crash; (b) stops a call at its 0.5 s timeout and starts the next call's worker; (c) receives,
   records and answers a 15 MB result. The longest ping during each.   budget: <= 20 ms
   Reference for (c): the time this client takes to receive a 15 MB line from a process that
   does nothing else (a ping answered just after the big one starts out waits that long: NDJSON
   lines cannot interleave).

7. Card sanitising (seed 004 output contract): ``cards.sanitize`` (nh3 on the card allow-list, with
   the inline-style check) on a 100 KB card of the kind a tool returns (a styled header, a
   100-row table with styled cells and links, then paragraphs of text), p50 of interleaved
   rounds. References in the same rounds: nh3 with its default settings on the same card, and
   nh3 on a 100 KB plain paragraph.                                   budget: p50 <= 5 ms
   Also (info): a 100 KB card that is nothing but a dense styled table (one tag per ~17 bytes).
   ``--cards`` runs only this section.

8. The sandbox's cost (issue 15): worker cold start (fresh pool -> first result) and the warm
   ``pool.call`` p50 on the host API, unconfined (``Sandbox("none")``, today's rlimits) and under
   bubblewrap, interleaved in rounds so drift hits both alike; Landlock alongside (info). The load
   average is printed: the machine is shared.     budget: +2 ms warm p50, +30 ms cold median

Times use ``time.perf_counter``; MB = 2^20 bytes (as /proc reports kB = 2^10). Temp folders are
removed at the end. The script exits 0 even when a budget is missed: it is a report; misses are
marked ``FAIL``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, misses_line, pct, print_header, print_table, run_in_temp_dir, tree_rss_bytes, vm_rss_bytes  # noqa: E402  (scripts/ is on sys.path when run as a script)

from sidecar.client import Pipes, SidecarClient  # noqa: E402  (after the sys.path insert above)
from sidecar.rpc.transport import PIPE_BYTES  # noqa: E402  (after the sys.path insert above)
from sidecar.sandbox.detect import detect  # noqa: E402  (after the sys.path insert above)
from sidecar.sandbox.runner import Sandbox  # noqa: E402  (after the sys.path insert above)
from sidecar.tools.providers.python.workers import SDK_DIR, Limits, ToolsetWorkers  # noqa: E402  (after the sys.path insert above)

PYTHON = sys.executable
MIB = 1 << 20

BUDGET_CALL_P50_MS = 15.0
BUDGET_WORKER_RSS_MIB = 40.0
BUDGET_STALL_MS = 20.0
BUDGET_CARD_MS = 5.0
CARD_BYTES = 100_000

TOOLSET_ID = "bench"
TOOL_ID = f"{TOOLSET_ID}:touch"
ENTRYPOINT = "tools.bench:touch"
SEED_FILES = 20

MANIFEST = f'''manifest_version: "1"
id: {TOOLSET_ID}
name: Bench
version: "1.0.0"
description: One small tool, for scripts/bench_tools.py
tools:
  - id: touch
    entrypoint: {ENTRYPOINT}
'''

BENCH_PY = '''from covalt_toolset import get_context, tool


@tool
def touch(name: str, n: int = 0) -> dict:
    """Write a small file into the workspace.

    Args:
        name: File path relative to the workspace
        n: Written into the file, so every call changes it
    """
    data = f"call {n}\\n"
    (get_context().workspace / name).write_text(data)
    return {"path": name, "size": len(data)}
'''


# ---------------------------------------------------------------------------------------------
# Statistics and small helpers


def write_toolset(folder: Path) -> Path:
    (folder / "tools").mkdir(parents=True)
    (folder / "toolset.yaml").write_text(MANIFEST)
    (folder / "tools" / "bench.py").write_text(BENCH_PY)
    return folder


# ---------------------------------------------------------------------------------------------
# 1-3. Warm calls through the sidecar


async def timed_request(client: SidecarClient, method: str, params: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = await client.request(method, params)
    return (time.perf_counter() - t0) * 1000, result


async def bench_sidecar(n_calls: int, warmup: int, rounds: int, n_import: int, tmp: Path) -> dict:
    folder = write_toolset(tmp / "bench-toolset")
    out: dict[str, Any] = {"chat": [], "nochat": [], "builtin": [], "ping": []}
    async with SidecarClient.spawn(tmp / "data", client_name="bench_tools") as client:
        await client.request("toolsets/import", {"path": str(folder)})
        chat_id = (await client.request("chats/create", {"title": "bench"}))["chat"]["id"]
        for i in range(SEED_FILES):
            await client.request("workspace/writeFile", {"chatId": chat_id, "path": f"src/file{i:02}.txt",
                                                         "text": f"seed file {i}\n" * 8})
        seq = iter(range(1, 1 << 30))

        def py_params(with_chat: bool) -> dict[str, Any]:
            p: dict[str, Any] = {"toolId": TOOL_ID, "args": {"name": "out.txt", "n": next(seq)}}
            return p | {"chatId": chat_id} if with_chat else p

        def builtin_params() -> dict[str, Any]:
            return {"toolId": "write_file", "chatId": chat_id,
                    "args": {"path": "builtin.txt", "content": f"call {next(seq)}\n"}}

        series = {
            "chat": lambda: ("tools/call", py_params(True)),
            "nochat": lambda: ("tools/call", py_params(False)),
            "builtin": lambda: ("tools/call", builtin_params()),
            "ping": lambda: ("ping", {}),
        }
        # Warm-up (not measured): the worker starts, the code paths and caches warm up.
        for make in series.values():
            for _ in range(warmup):
                method, params = make()
                await client.request(method, params)
        # A correctness check outside the timed part.
        params = py_params(True)
        check = (await client.request("tools/call", params))["toolCall"]
        expected = {"path": "out.txt", "size": len(f"call {params['args']['n']}\n")}
        if check["status"] != "success" or check["result"] != expected:
            raise RuntimeError(f"unexpected tool call record: {check}")
        if not check.get("postManifestId") or check["postManifestId"] == check.get("preManifestId"):
            raise RuntimeError(f"the call did not make a new workspace version: {check}")
        files = (await client.request("workspace/files", {"chatId": chat_id}))["files"]
        if len(files) != SEED_FILES + 2:
            raise RuntimeError(f"expected {SEED_FILES + 2} files in the workspace, got {len(files)}")

        per_round = max(1, n_calls // rounds)
        for _ in range(rounds):
            for name, make in series.items():
                for _ in range(per_round):
                    method, params = make()
                    ms, result = await timed_request(client, method, params)
                    if method == "tools/call" and result["toolCall"]["status"] != "success":
                        raise RuntimeError(f"tool call failed: {result['toolCall']}")
                    out[name].append(ms)

        stats = await client.request("debug/info")
        out["sidecar_pid"] = client.proc.pid
        out["sidecar_rss"] = vm_rss_bytes(client.proc.pid)
        out["debug_info"] = stats

        # 5. The 100-tool bundle (after the warm series, so its toolsets do not weigh on them).
        out["bundle"] = await bench_bundle(client, n_import, tmp)
    out["stderr_tail"] = client.stderr_text().splitlines()[-5:]
    return out


# ---------------------------------------------------------------------------------------------
# 1. Reference: the same function in this process


def bench_inprocess(n_calls: int, warmup: int, tmp: Path) -> list[float]:
    folder = write_toolset(tmp / "inproc-toolset")
    ws = tmp / "inproc-ws"
    ws.mkdir()
    if str(SDK_DIR) not in sys.path:
        sys.path.insert(0, str(SDK_DIR))
    import covalt_toolset  # pyright: ignore[reportMissingImports] - the SDK is on sys.path only from here

    spec = importlib.util.spec_from_file_location("bench_tools_inproc", folder / "tools" / "bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    touch = module.touch
    ctx = covalt_toolset.ToolContext(workspace=ws, chat_id="c1", toolset_id=TOOLSET_ID, toolset_dir=folder)
    set_context, clear_context = covalt_toolset.set_context, covalt_toolset.clear_context
    perf = time.perf_counter
    out: list[float] = []
    result: Any = None
    for i in range(warmup + n_calls):
        t0 = perf()
        token = set_context(ctx)
        try:
            result = touch(name="out.txt", n=i)
        finally:
            clear_context(token)
        t1 = perf()
        if i >= warmup:
            out.append((t1 - t0) * 1000)
    assert result == {"path": "out.txt", "size": len(f"call {warmup + n_calls - 1}\n")}, result
    return out


# ---------------------------------------------------------------------------------------------
# 4. Cold start, warm hop and idle RSS with the host API


def spawn_reference() -> float:
    t0 = time.perf_counter()
    subprocess.run([PYTHON, "-I", "-c", "pass"], check=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


async def bench_workers(n_cold: int, n_warm: int, tmp: Path) -> dict:
    folder = write_toolset(tmp / "pool-toolset")
    ws = tmp / "pool-ws"
    ws.mkdir()
    context = {"workspace": str(ws), "chatId": "c1", "toolCallId": "t1"}
    limits = Limits()
    args = {"name": "out.txt", "n": 1}

    spawn_reference()  # warm the page cache; not measured
    cold: list[float] = []
    ref: list[float] = []
    for _ in range(n_cold + 1):  # the first pool (page cache, our own imports) is not counted
        pool = ToolsetWorkers(TOOLSET_ID, folder, limits)
        try:
            t0 = time.perf_counter()
            result = await pool.call("touch", ENTRYPOINT, args, context=context)
            cold.append((time.perf_counter() - t0) * 1000)
            assert result == {"path": "out.txt", "size": 7}, result
        finally:
            await pool.aclose()
        ref.append(spawn_reference())
    cold, ref = cold[1:], ref[1:]

    # One warm pool: the worker hop alone, then the idle worker's RSS.
    pool = ToolsetWorkers(TOOLSET_ID, folder, limits)
    try:
        warm: list[float] = []
        for i in range(20 + n_warm):
            t0 = time.perf_counter()
            await pool.call("touch", ENTRYPOINT, {"name": "out.txt", "n": i}, context=context)
            if i >= 20:
                warm.append((time.perf_counter() - t0) * 1000)
        pids = pool.stats()["pids"]
        await anyio.sleep(0.3)  # idle
        rss = [tree_rss_bytes(pid) for pid in pids]  # bwrap and what runs below it
    finally:
        await pool.aclose()

    async with await anyio.open_process([PYTHON, "-I", "-c", "import sys; sys.stdin.readline()"],
                                        stdout=None, stderr=None) as bare:
        await anyio.sleep(0.3)
        bare_rss = tree_rss_bytes(bare.pid)
        assert bare.stdin is not None
        await bare.stdin.aclose()
        await bare.wait()
    return {"cold": cold, "ref": ref, "warm": warm, "rss": [r for r in rss if r], "bare_rss": bare_rss}


# ---------------------------------------------------------------------------------------------
# 8. The sandbox's cost

BUDGET_SANDBOX_WARM_MS = 2.0
BUDGET_SANDBOX_COLD_MS = 30.0


async def bench_sandbox(rounds: int, n_cold: int, n_warm: int, tmp: Path) -> dict[str, dict[str, list[float]]]:
    folder = write_toolset(tmp / "sandbox-toolset")
    ws = tmp / "sandbox-ws"
    ws.mkdir(exist_ok=True)
    context = {"workspace": str(ws), "chatId": "c1", "toolCallId": "t1"}
    kinds = ["none"] + [k for k in ("bubblewrap", "landlock") if detect(k).mechanism == k]  # type: ignore[arg-type]
    found: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in kinds}
    for kind in kinds:  # not measured: page cache, the probe, our own imports
        pool = ToolsetWorkers(TOOLSET_ID, folder, Limits(), sandbox=Sandbox(kind))  # type: ignore[arg-type]
        await pool.call("touch", ENTRYPOINT, {"name": "out.txt", "n": 0}, context=context)
        await pool.aclose()
    for _ in range(rounds):
        for kind in kinds:
            sandbox = Sandbox(kind)  # type: ignore[arg-type]
            for _ in range(n_cold):
                pool = ToolsetWorkers(TOOLSET_ID, folder, Limits(), sandbox=sandbox)
                try:
                    t0 = time.perf_counter()
                    await pool.call("touch", ENTRYPOINT, {"name": "out.txt", "n": 1}, context=context)
                    found[kind]["cold"].append((time.perf_counter() - t0) * 1000)
                finally:
                    await pool.aclose()
            pool = ToolsetWorkers(TOOLSET_ID, folder, Limits(), sandbox=sandbox)
            try:
                for i in range(10 + n_warm):
                    t0 = time.perf_counter()
                    await pool.call("touch", ENTRYPOINT, {"name": "out.txt", "n": i}, context=context)
                    if i >= 10:
                        found[kind]["warm"].append((time.perf_counter() - t0) * 1000)
            finally:
                await pool.aclose()
    return found


def sandbox_rows(rows: Rows, found: dict[str, dict[str, list[float]]]) -> None:
    med = statistics.median
    base = found["none"]
    warm0, cold0 = pct(base["warm"], 50), med(base["cold"])
    rows.add(f"warm pool.call p50, unconfined (rlimits only) (n={len(base['warm'])})", f"{warm0:.2f} ms",
             "-", "-", None)
    rows.add(f"worker cold start median, unconfined (n={len(base['cold'])})", f"{cold0:.1f} ms", "-", "-", None)
    for kind in ("bubblewrap", "landlock"):
        if kind not in found:
            rows.add(f"{kind}", "n/a (cannot run here)", "-", "-", None)
            continue
        warm, cold = pct(found[kind]["warm"], 50), med(found[kind]["cold"])
        judged = kind == "bubblewrap"  # the mechanism in use where it runs; Landlock is the fallback
        rows.add(f"warm pool.call p50, {kind}", f"{warm:.2f} ms ({warm - warm0:+.2f})", f"{warm0:.2f} ms unconfined",
                 f"+{BUDGET_SANDBOX_WARM_MS:.0f} ms" if judged else "-",
                 warm - warm0 <= BUDGET_SANDBOX_WARM_MS if judged else None)
        rows.add(f"worker cold start median, {kind}", f"{cold:.1f} ms ({cold - cold0:+.1f})",
                 f"{cold0:.1f} ms unconfined", f"+{BUDGET_SANDBOX_COLD_MS:.0f} ms" if judged else "-",
                 cold - cold0 <= BUDGET_SANDBOX_COLD_MS if judged else None)


def main_sandbox(rounds: int, n_cold: int, n_warm: int) -> int:
    t_start = time.perf_counter()
    load = os.getloadavg()
    found = run_in_temp_dir("bench_tools-", bench_sandbox, rounds, n_cold, n_warm)
    rows = Rows()
    sandbox_rows(rows, found)
    print_header(PYTHON)
    print(f"mode     --sandbox  {rounds} interleaved rounds of {n_cold} cold starts and {n_warm} warm calls each")
    print(f"load     {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before, "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} after (1/5/15 min; {os.cpu_count()} CPUs, shared)")
    print()
    print_table(rows)
    print(misses_line(rows))
    print(f"wall time: {time.perf_counter() - t_start:.1f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# 5. A 100-tool bundle


def bundle_module(m: int, per_module: int) -> tuple[str, list[str]]:
    """A module of ``per_module`` tools: the first half ``@tool`` with type hints, the rest legacy."""
    typed = per_module // 2
    lines = ["from typing import Literal", "", "from covalt_toolset import get_context, tool", "", ""]
    decls: list[str] = []
    for t in range(per_module):
        name = f"m{m}_t{t}"
        if t < typed:
            lines += [
                "@tool",
                f"def {name}(path: str, count: int = 1, ratio: float = 0.5, tags: list[str] | None = None,",
                "        mode: Literal['fast', 'slow'] = 'fast', verbose: bool = False) -> dict:",
                f'    """Tool {t} of module {m}: does a small thing with a file.',
                "",
                "    Args:",
                "        path: File path relative to the workspace",
                "        count: How many times",
                "        ratio: A fraction between 0 and 1",
                "        tags: Labels to attach",
                "        mode: How to go about it",
                "        verbose: Say more",
                '    """',
                "    return {'path': path, 'count': count, 'ws': str(get_context().workspace)}",
                "",
                "",
            ]
            decls.append(f"  - id: {name}\n    entrypoint: tools.mod{m}:{name}\n")
        else:
            lines += [
                f"def {name}(workspace, path, count=1):",
                f'    """Legacy tool {t} of module {m}."""',
                "    return {'path': path, 'count': count}",
                "",
                "",
            ]
            decls.append(
                f"  - id: {name}\n    name: Legacy {m}.{t}\n    description: Legacy tool {t} of module {m}\n"
                f"    entrypoint: tools.mod{m}:{name}\n"
                "    input_schema:\n      type: object\n      properties:\n"
                "        path:\n          type: string\n          description: File path relative to the workspace\n"
                "        count:\n          type: integer\n          minimum: 1\n"
                "      required: [path]\n"
            )
    return "\n".join(lines), decls


def make_bundle(folder: Path, toolset_id: str, modules: int = 10, per_module: int = 10) -> Path:
    (folder / "tools").mkdir(parents=True)
    decls: list[str] = []
    for m in range(modules):
        source, d = bundle_module(m, per_module)
        (folder / "tools" / f"mod{m}.py").write_text(source)
        decls += d
    (folder / "toolset.yaml").write_text(
        f'manifest_version: "1"\nid: {toolset_id}\nname: Bundle {toolset_id}\nversion: "1.0.0"\n'
        f"description: {modules * per_module} generated tools\ntools:\n" + "".join(decls))
    return folder


def zip_folder(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(folder).as_posix())
    return target


async def bench_bundle(client: SidecarClient, n: int, tmp: Path) -> dict:
    base = tmp / "bundles"
    out: dict[str, list[float]] = {"folder": [], "zip": [], "inspect_folder": [], "inspect_zip": []}
    tools = 0
    for i in range(n):  # interleaved: each variant once per round
        # A folder of its own for each import: a local toolset follows its folder (authoring loop).
        folder = make_bundle(base / f"dir{i}", f"bundle-dir-{i}")
        archive = zip_folder(make_bundle(base / f"zipsrc{i}", f"bundle-zip-{i}"), base / f"bundle{i}.zip")
        ms, got = await timed_request(client, "toolsets/inspect", {"path": str(folder)})
        out["inspect_folder"].append(ms)
        tools = len(got["tools"])
        ms, _ = await timed_request(client, "toolsets/inspect", {"path": str(archive)})
        out["inspect_zip"].append(ms)
        ms, _ = await timed_request(client, "toolsets/import", {"path": str(folder)})
        out["folder"].append(ms)
        ms, _ = await timed_request(client, "toolsets/import", {"path": str(archive)})
        out["zip"].append(ms)
    detail = await client.request("toolsets/get", {"id": "bundle-zip-0"})
    listed = detail["tools"]
    typed = next(t for t in listed if t["id"] == "bundle-zip-0:m0_t0")
    if len(listed) != tools or set(typed["inputSchema"]["properties"]) != {"path", "count", "ratio", "tags",
                                                                          "mode", "verbose"}:
        raise RuntimeError(f"the bundle was not installed as expected: {len(listed)} tools, {typed}")
    return {**out, "tools": tools}


# ---------------------------------------------------------------------------------------------
# 6. The event loop while a worker starts, restarts or answers big


STALL_ID = "stall"
STALL_MANIFEST = f'''manifest_version: "1"
id: {STALL_ID}
name: Stall
version: "1.0.0"
description: Tools that make the sidecar work hard around its workers, for scripts/bench_tools.py
tools:
  - id: touch
    entrypoint: tools.stall:touch
  - id: die
    entrypoint: tools.stall:die
  - id: hang
    entrypoint: tools.stall:hang
    timeout: 0.5
  - id: big
    entrypoint: tools.stall:big
'''

STALL_PY = '''import os, time
from covalt_toolset import tool


@tool
def touch() -> int:
    return os.getpid()


@tool
def die() -> None:
    os._exit(3)


@tool
def hang() -> None:
    time.sleep(60)


@tool
def big(n: int) -> str:
    return "x" * n
'''

# The reference for the 15 MB result: the same size of answer from a process that does nothing
# else, read by the same client. A ping queued behind such a line waits at least this long.
PLAIN_WRITER = '''import fcntl, json, os, sys
fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 1 << 20)  # the pipe the sidecar gives itself
body = b"x" * 15_000_000 + b'"}\\n'
for line in sys.stdin.buffer:
    os.write(1, b'{"jsonrpc":"2.0","id":%d,"result":"' % json.loads(line)["id"])
    view = memoryview(body)
    while view:
        view = view[os.write(1, view):]
'''

_ID = re.compile(rb'"id":(\d+)')


class RawClient:
    """The sidecar over its pipes with nothing heavy on our side: lines are split as they come
    (reads of up to 1 MiB, as the sidecar widens its pipe to that), a big answer is never parsed
    nor even gathered (its size and id are all we keep), so the ping times are the sidecar's
    and not this client's."""

    SMALL = 1 << 16  # a line longer than this is counted, not kept

    def __init__(self, pipes: Pipes) -> None:
        self.pipes = pipes
        self.ids = iter(range(1, 1 << 30))
        self.waiting: dict[int, tuple[anyio.Event, list[Any]]] = {}
        self._parts: list[bytes] = []  # the line so far, while it is small
        self._head = b""  # its first bytes, where its id is
        self._size = 0

    async def read(self) -> None:
        fd = self.pipes.from_child
        os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, PIPE_BYTES)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not chunk:
                return
            view, start = memoryview(chunk), 0
            while (nl := chunk.find(b"\n", start)) >= 0:
                self._take(view[start:nl])
                self._line_ends()
                start = nl + 1
            if start < len(chunk):
                self._take(view[start:])

    def _take(self, piece: memoryview) -> None:
        if len(self._head) < 64:
            self._head += bytes(piece[:64 - len(self._head)])
        self._size += len(piece)
        if self._size <= self.SMALL:
            self._parts.append(bytes(piece))
        else:
            self._parts.clear()

    def _line_ends(self) -> None:
        m = _ID.search(self._head)
        if m and (slot := self.waiting.pop(int(m[1]), None)):
            slot[1].append({"size": self._size} if self._size > self.SMALL else b"".join(self._parts))
            slot[0].set()
        self._parts, self._head, self._size = [], b"", 0

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        request_id = next(self.ids)
        done: tuple[anyio.Event, list[Any]] = (anyio.Event(), [])
        self.waiting[request_id] = done
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        os.write(self.pipes.to_child, json.dumps(message).encode() + b"\n")  # small: the pipe takes it whole
        await done[0].wait()
        line = done[1][0]
        if isinstance(line, dict):
            return line
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


async def longest_ping(client: RawClient, work: Any) -> tuple[float, Any]:
    """Run ``work()`` while pinging back to back; the longest ping (ms) and what work returned.
    The ping in flight when the work ends is waited for too: it is the one queued behind the
    work's answer (a big one keeps it waiting until the client has read all of it)."""
    pings: list[float] = []
    out: list[Any] = []
    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            out.append(await work())
            done.set()

        tg.start_soon(run)
        while not done.is_set():
            t0 = time.perf_counter()
            await client.request("ping")
            pings.append((time.perf_counter() - t0) * 1000)
    return max(pings), out[0]


async def bench_stalls(repeats: int, tmp: Path) -> dict[str, list[float]]:
    folder = tmp / "stall-toolset"
    (folder / "tools").mkdir(parents=True)
    (folder / "toolset.yaml").write_text(STALL_MANIFEST)
    (folder / "tools" / "stall.py").write_text(STALL_PY)
    out: dict[str, list[float]] = {"cold": [], "timeout": [], "big": [], "plain": [], "rest": []}
    side = await Pipes.open([PYTHON, "-m", "sidecar", "--data-dir", str(tmp / "stall-data")],
                            stderr=subprocess.DEVNULL)
    writer = await Pipes.open([PYTHON, "-c", PLAIN_WRITER], stderr=subprocess.DEVNULL)
    client, plain = RawClient(side), RawClient(writer)
    proc = side.proc
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.read)
            tg.start_soon(plain.read)
            await client.request("initialize", {"clientInfo": {"name": "bench_tools", "version": "0"}})
            for _ in range(50):  # the reference: pings with nothing else going on
                t0 = time.perf_counter()
                await client.request("ping")
                out["rest"].append((time.perf_counter() - t0) * 1000)

            def call(tool: str, args: dict[str, Any] | None = None) -> Any:
                return lambda: client.request("tools/call", {"toolId": f"{STALL_ID}:{tool}", "args": args or {}})

            # The first worker of a toolset starts inside toolsets/import (to describe the tools).
            ms, _ = await longest_ping(client, lambda: client.request("toolsets/import", {"path": str(folder)}))
            out["cold"].append(ms)
            # One 15 MB line through each reader first, unmeasured: this client's first ones cost it
            # fresh memory (a plain writer's first lines took it 40-46 ms, the later ones 10-13 ms),
            # which would be timed as the sidecar's stall.
            assert (await plain.request("big"))["size"] > 15_000_000
            assert (await call("big", {"n": 15_000_000})())["size"] > 15_000_000
            for _ in range(repeats):
                await client.request("tools/call", {"toolId": f"{STALL_ID}:die", "args": {}})
                ms, got = await longest_ping(client, call("touch"))  # a fresh worker starts
                assert got["toolCall"]["status"] == "success", got
                out["cold"].append(ms)
                ms, got = await longest_ping(client, call("hang"))  # stopped, killed, then ...
                assert got["toolCall"]["errorKind"] == "timeout", got
                ms2, _ = await longest_ping(client, call("touch"))  # ... a fresh worker starts
                out["timeout"].append(max(ms, ms2))
                t0 = time.perf_counter()
                assert (await plain.request("big"))["size"] > 15_000_000
                out["plain"].append((time.perf_counter() - t0) * 1000)
                ms, got = await longest_ping(client, call("big", {"n": 15_000_000}))
                assert got["size"] > 15_000_000, got
                out["big"].append(ms)
            await client.request("shutdown")
            os.write(side.to_child, b'{"jsonrpc":"2.0","method":"exit"}\n')
            await proc.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for p in (side, writer):
                if p.proc.returncode is None:
                    p.proc.kill()
                await p.proc.aclose()
                p.close()
    return out


# ---------------------------------------------------------------------------------------------
# Report


async def run_all(args: argparse.Namespace, tmp: Path) -> tuple[dict, list[float], dict, dict]:
    workers = await bench_workers(args.cold, args.calls, tmp)
    side = await bench_sidecar(args.calls, args.warmup, args.rounds, args.imports, tmp)
    inproc = bench_inprocess(args.calls, args.warmup, tmp)
    stalls = await bench_stalls(args.stalls, tmp)
    return side, inproc, workers, stalls


def make_card(kind: str) -> str:
    """A card of about CARD_BYTES characters: ``mixed`` as a tool writes one, ``dense`` all table."""
    row = ('<tr><td style="padding:4px 8px;color:#333">Monday</td><td style="text-align:right;'
           'font-weight:600">21&deg;C</td><td><a href="https://example.com/d">details</a></td></tr>')
    if kind == "dense":
        body = row * (CARD_BYTES // len(row))
        return f'<div style="padding:16px"><table style="width:100%">{body}</table></div>'
    head = ('<div style="padding:16px;font-family:sans-serif;background:#f4f8fc;border-radius:8px">'
            '<h2 style="margin:0 0 8px;color:#123">Valletta, the week ahead</h2>')
    table = f'<table style="width:100%;border-collapse:collapse">{row * 100}</table>'
    para = ('<p style="margin:0 0 8px;line-height:1.5">' + "Mild with light winds and occasional showers "
            "in the afternoon; the sea stays calm and the evenings are cool. " * 4 + "</p>")
    paras = para * max(1, (CARD_BYTES - len(head) - len(table)) // len(para))
    return head + table + paras + "</div>"


def bench_cards(rounds: int, per_round: int) -> dict[str, list[float]]:
    import nh3

    from sidecar.tools import cards

    mixed, dense = make_card("mixed"), make_card("dense")
    plain = "<p>" + "lorem ipsum " * (CARD_BYTES // 12) + "</p>"
    series = {"card": (cards.sanitize, mixed), "nh3": (nh3.clean, mixed), "plain": (nh3.clean, plain),
              "dense": (cards.sanitize, dense), "dense_nh3": (nh3.clean, dense)}
    times: dict[str, list[float]] = {k: [] for k in series}
    for fn, html in series.values():
        fn(html)  # warm: the cleaner is built once
    for _ in range(rounds):
        for key, (fn, html) in series.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn(html)
                times[key].append((time.perf_counter() - t0) * 1000)
    times["sizes"] = [len(mixed), len(dense), len(plain)]
    return times


def card_rows(rows: Rows, c: dict[str, list[float]]) -> None:
    p50 = pct(c["card"], 50)
    kb = c["sizes"][0] / 1000
    rows.add(f"sanitise a {kb:.0f} KB card (mixed), p50 (n={len(c['card'])})", f"{p50:.2f} ms",
             f"{pct(c['nh3'], 50):.2f} ms nh3 defaults; {pct(c['plain'], 50):.2f} ms nh3 plain paragraph",
             f"<= {BUDGET_CARD_MS:.0f} ms", p50 <= BUDGET_CARD_MS)
    rows.add("sanitise a 100 KB card (mixed), p99", f"{pct(c['card'], 99):.2f} ms",
             f"{pct(c['nh3'], 99):.2f} ms nh3 defaults", "-", None)
    rows.add(f"sanitise a {c['sizes'][1] / 1000:.0f} KB dense-table card, p50", f"{pct(c['dense'], 50):.2f} ms",
             f"{pct(c['dense_nh3'], 50):.2f} ms nh3 defaults", "-", None)


def main_cards(rounds: int) -> int:
    rows = Rows()
    card_rows(rows, bench_cards(rounds, 20))
    print_header(PYTHON)
    print(f"mode     --cards  {rounds} interleaved rounds of 20")
    print()
    print_table(rows)
    print(misses_line(rows))
    return 0


def stall_rows(rows: Rows, stalls: dict[str, list[float]]) -> None:
    rest = f"{pct(stalls['rest'], 50):.3f} ms ping p50 at rest"
    for key, what in (("cold", "a worker's cold start (toolsets/import, first call after a crash)"),
                      ("timeout", "a timed-out call and the restart after it"),
                      ("big", "a 15 MB result")):
        longest = max(stalls[key])
        ref = rest
        if key == "big":
            ref = f"{max(stalls['plain']):.1f} ms a plain 15 MB line (longest)"
        rows.add(f"longest ping during {what} (n={len(stalls[key])})", f"{longest:.1f} ms", ref,
                 f"<= {BUDGET_STALL_MS:.0f} ms", longest <= BUDGET_STALL_MS)


def main_stalls(repeats: int) -> int:
    t_start = time.perf_counter()
    stalls = run_in_temp_dir("bench_tools-", bench_stalls, repeats)
    rows = Rows()
    stall_rows(rows, stalls)
    print_header(PYTHON)
    print(f"mode     --stalls  {repeats} rounds")
    print()
    print_table(rows)
    print("each round:", "; ".join(f"{k} " + " ".join(f"{v:.1f}" for v in vs)
                                    for k, vs in stalls.items() if k != "rest"), "(ms)")
    print(misses_line(rows))
    print(f"wall time: {time.perf_counter() - t_start:.1f} s")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer calls and spawns (smoke run)")
    ap.add_argument("--calls", type=int, default=None, help="measured calls per warm series (default 500)")
    ap.add_argument("--stalls", dest="stalls_only", action="store_true",
                    help="only the longest pings around workers (section 6)")
    ap.add_argument("--cards", dest="cards_only", action="store_true", help="only card sanitising (section 7)")
    ap.add_argument("--sandbox", dest="sandbox_only", action="store_true", help="only the sandbox's cost (section 8)")
    args = ap.parse_args()
    if args.cards_only:
        return main_cards(3 if args.quick else 10)
    if args.sandbox_only:
        return main_sandbox(2 if args.quick else 5, 2 if args.quick else 4, 50 if args.quick else 200)
    if args.quick:
        args.calls = args.calls or 100
        args.warmup, args.rounds, args.cold, args.imports, args.stalls = 10, 2, 3, 1, 2
    else:
        args.calls = args.calls or 500
        args.warmup, args.rounds, args.cold, args.imports, args.stalls = 20, 5, 10, 3, 5
    if args.stalls_only:
        return main_stalls(args.stalls)

    t_start = time.perf_counter()
    side, inproc, workers, stalls = run_in_temp_dir("bench_tools-", run_all, args)
    wall = time.perf_counter() - t_start

    med = statistics.median
    rows = Rows()
    add = rows.add

    chat, nochat, builtin, ping = side["chat"], side["nochat"], side["builtin"], side["ping"]
    ip50, ip99 = pct(inproc, 50), pct(inproc, 99)
    p50 = pct(chat, 50)
    add(f"warm Python tool call, chatId, p50 (n={len(chat)} sequential)",
        f"{p50:.2f} ms", f"{ip50:.3f} ms in-process", f"<= {BUDGET_CALL_P50_MS:.0f} ms",
        p50 <= BUDGET_CALL_P50_MS)
    add("warm Python tool call, chatId, p99",
        f"{pct(chat, 99):.2f} ms", f"{ip99:.3f} ms in-process", "-", None)
    add(f"warm Python tool call, no chatId (scratch dir), p50 (n={len(nochat)})",
        f"{pct(nochat, 50):.2f} ms", f"{ip50:.3f} ms in-process", "-", None)
    add("warm Python tool call, no chatId, p99",
        f"{pct(nochat, 99):.2f} ms", f"{ip99:.3f} ms in-process", "-", None)
    add(f"built-in write_file, same chat, p50 (n={len(builtin)})",
        f"{pct(builtin, 50):.2f} ms", f"{ip50:.3f} ms in-process", "-", None)
    add("built-in write_file, same chat, p99",
        f"{pct(builtin, 99):.2f} ms", f"{ip99:.3f} ms in-process", "-", None)
    add(f"ping through the same client, p50 (n={len(ping)})",
        f"{pct(ping, 50):.3f} ms", "-", "-", None)
    w = workers["warm"]
    add(f"worker hop alone: warm pool.call, host API, p50 (n={len(w)})",
        f"{pct(w, 50):.2f} ms", f"{ip50:.3f} ms in-process", "-", None)
    add("  chatId p50 = worker hop / other sidecar work / snapshot (chatId - no chatId)",
        f"{pct(w, 50):.2f} / {pct(nochat, 50) - pct(w, 50):.2f} / {p50 - pct(nochat, 50):.2f} ms",
        "-", "-", None)

    cm, rm = med(workers["cold"]), med(workers["ref"])
    add(f"worker cold start: fresh pool -> first result, median (n={len(workers['cold'])})",
        f"{cm:.1f} ms", f"{rm:.1f} ms python -I -c pass", "-", None)
    add("worker cold start, max",
        f"{max(workers['cold']):.1f} ms", f"{max(workers['ref']):.1f} ms python -I -c pass", "-", None)
    bare = workers["bare_rss"]
    bare_txt = f"{bare / MIB:.1f} MB bare python -I" if bare else "n/a"
    if workers["rss"]:
        rss = max(workers["rss"])
        add("idle toolset worker memory (Pss of its process tree)", f"{rss / MIB:.1f} MB", bare_txt,
            f"<= {BUDGET_WORKER_RSS_MIB:.0f} MB", rss <= BUDGET_WORKER_RSS_MIB * MIB)
    else:
        add("idle toolset worker memory (Pss of its process tree)", "n/a (no live worker)", bare_txt,
            f"<= {BUDGET_WORKER_RSS_MIB:.0f} MB", False)

    b = side["bundle"]
    n_tools, n_imp = b["tools"], len(b["folder"])
    add(f"import {n_tools}-tool bundle, folder, fresh id, median (n={n_imp})",
        f"{med(b['folder']):.0f} ms", f"{med(b['inspect_folder']):.0f} ms inspect", "-", None)
    add(f"import {n_tools}-tool bundle, ZIP, fresh id, median (n={n_imp})",
        f"{med(b['zip']):.0f} ms", f"{med(b['inspect_zip']):.0f} ms inspect", "-", None)

    stall_rows(rows, stalls)
    card_rows(rows, bench_cards(3 if args.quick else 10, 20))
    sandbox_rows(rows, run_in_temp_dir("bench_tools-", bench_sandbox, 2 if args.quick else 5,
                                       2 if args.quick else 4, 50 if args.quick else 200))

    print_header(PYTHON)
    print(f"mode     {'--quick' if args.quick else 'full'}  calls={args.calls} per series, "
          f"{args.rounds} interleaved rounds, warm-up {args.warmup}; workspace: {SEED_FILES} seed files "
          f"(MB = 2^20 bytes)")
    print()
    print_table(rows)
    if side.get("sidecar_rss"):
        print(f"sidecar RSS after the warm series: {side['sidecar_rss'] / MIB:.1f} MB (/proc VmRSS; "
              f"debug/info rssBytes {side['debug_info']['rssBytes'] / MIB:.1f} MB)")
    print(misses_line(rows))
    print(f"wall time: {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
