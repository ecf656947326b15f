#!/usr/bin/env python3
"""Benchmark the sidecar's stdio JSON-RPC against references measured in the same run.

    .venv/bin/python scripts/bench_rpc.py           full run (about a minute)
    .venv/bin/python scripts/bench_rpc.py --quick   smaller run (a few seconds)

Absolute times drift on a shared machine, so every row puts the sidecar's figure beside a
reference taken in the same run (sidecar and reference samples are interleaved):

1. spawn -> first ``initialize`` reply (fresh data dir, so the first-run migration is included;
   and with an existing data dir) vs a bare ``python -c "import anyio, msgspec, aiosqlite"``
   spawn -> exit.                                                   budget: median <= 150 ms
   Measured twice: in the inherited environment, and with bytecode cached (PYTHONPYCACHEPREFIX
   pointing at a temp dir, bytecode writing on), because a venv synced without
   ``--compile-bytecode`` under PYTHONDONTWRITEBYTECODE=1 recompiles every module on every spawn.
2. ``ping`` round trip, p50/p99 of sequential calls vs a minimal NDJSON echo loop.
                                                                    budget: p50 <= 0.3 ms
3. pipelined ``ping`` throughput (a writer thread pushes every request while the main thread reads
   the replies) vs the same echo loop.                              budget: >= 8,000 req/s
4. idle RSS after ``initialize`` (debug/info ``rssBytes``, cross-checked with /proc VmRSS) vs a
   bare interpreter that imported anyio, msgspec and aiosqlite; and which heavy modules are
   loaded.                                                          budget: <= 50 MiB, none loaded

The client here is deliberately minimal and synchronous (os.write / os.read on the pipe fds) so
its own overhead stays small next to what is measured. Every sidecar is stopped with ``shutdown``
(waiting for its answer) then ``exit``, and its exit code must be 0. The script exits 0 even when
a budget is missed: it is a report; misses are marked ``FAIL``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# scripts/ is on sys.path when run as a script
from _bench import Rows, misses_line, pct, print_header, print_table, vm_rss_bytes

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
MIB = 1 << 20

BUDGET_SPAWN_MS = 150.0
BUDGET_SPAWN_OVER_IMPORT_MS = 40.0  # what the sidecar may add to a bare anyio + msgspec + aiosqlite start
BUDGET_PING_P50_MS = 0.3
BUDGET_THROUGHPUT = 8_000.0
BUDGET_RSS_MIB = 50.0
HEAVY = ("mcp", "pydantic", "openai", "anthropic", "watchfiles")

REFERENCE_IMPORT = "import anyio, msgspec, aiosqlite"

# The reference server: the least a Python NDJSON JSON-RPC loop can do.
ECHO_LOOP = r"""
import json, sys
rd = sys.stdin.buffer.readline
out = sys.stdout.buffer
dumps = json.dumps
while True:
    line = rd()
    if not line:
        break
    if not line.strip():
        continue
    msg = json.loads(line)
    if "id" in msg:
        out.write(dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}},
                        separators=(",", ":")).encode() + b"\n")
        out.flush()
"""

# The RSS reference: an idle interpreter holding the sidecar's core dependencies.
IDLE_IMPORTS = (
    REFERENCE_IMPORT + "\nimport sys\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.readline()\n"
)


# ---------------------------------------------------------------------------------------------
# A minimal synchronous NDJSON peer over subprocess pipes


class Peer:
    def __init__(self, argv: list[str], stderr_path: Path | None = None, cwd: Path = ROOT,
                 env: dict[str, str] | None = None) -> None:
        self._stderr_file = open(stderr_path, "wb") if stderr_path else None  # noqa: SIM115 (open for the life of the peer, closed when it stops)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file or subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.buf = b""
        self.stderr_path = stderr_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def read_line(self) -> bytes:
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                return line
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                raise EOFError(f"pid {self.pid} closed stdout (exit code {self.proc.poll()})"
                               + self._stderr_tail())
            self.buf += chunk

    def call(self, request_id: int, method: str, params: dict | None = None) -> dict:
        msg: dict = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        while True:  # skip notifications / unrelated lines
            reply = json.loads(self.read_line())
            if reply.get("id") == request_id and "method" not in reply:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply

    def shutdown(self, request_id: int = 999_999_999, timeout: float = 10.0) -> int:
        """shutdown (wait for its answer), exit, then wait for the exit code."""
        self.call(request_id, "shutdown")
        self.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
        return self.wait(timeout)

    def wait(self, timeout: float = 10.0) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = -9
        self.close()
        return code

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        if self._stderr_file:
            self._stderr_file.close()
            self._stderr_file = None

    def _stderr_tail(self) -> str:
        if self.stderr_path and self.stderr_path.exists():
            tail = self.stderr_path.read_text(errors="replace").splitlines()[-10:]
            return "\nstderr:\n" + "\n".join(tail)
        return ""


def sidecar_argv(data_dir: Path) -> list[str]:
    return [PYTHON, "-m", "sidecar", "--data-dir", str(data_dir)]


INIT_REQ = (b'{"jsonrpc":"2.0","id":1,"method":"initialize",'
            b'"params":{"clientInfo":{"name":"bench_rpc","version":"0"}}}\n')
READY_REQ = b'{"jsonrpc":"2.0","id":2,"method":"chats/list"}\n'


# ---------------------------------------------------------------------------------------------
# Statistics


class Exits:
    """Every sidecar we start must exit 0 after shutdown + exit."""

    def __init__(self) -> None:
        self.total = 0
        self.bad: list[str] = []

    def record(self, what: str, code: int) -> None:
        self.total += 1
        if code != 0:
            self.bad.append(f"{what}: exit code {code}")


# ---------------------------------------------------------------------------------------------
# 1. Spawn -> initialize reply


def spawn_to_initialize(data_dir: Path, stderr_path: Path, exits: Exits, what: str,
                        env: dict[str, str] | None = None, ready: list[float] | None = None) -> float:
    """ms from spawn to the ``initialize`` reply; with ``ready``, also appends the ms to the
    answer of a first request that needs the services (``chats/list``, sent with initialize)."""
    t0 = time.perf_counter()
    peer = Peer(sidecar_argv(data_dir), stderr_path, env=env)
    peer.write(INIT_REQ + (READY_REQ if ready is not None else b""))  # sits in the pipe until read
    line = peer.read_line()
    elapsed = time.perf_counter() - t0
    reply = json.loads(line)
    if reply.get("id") != 1 or "result" not in reply:
        raise RuntimeError(f"unexpected first line from the sidecar: {line[:300]!r}")
    if ready is not None:
        second = json.loads(peer.read_line())
        ready.append((time.perf_counter() - t0) * 1000)
        if second.get("id") != 2 or "result" not in second:
            raise RuntimeError(f"unexpected answer to chats/list: {second!r:.300}")
    exits.record(what, peer.shutdown())
    return elapsed * 1000


def spawn_reference(env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([PYTHON, "-c", REFERENCE_IMPORT], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"reference import failed with code {proc.returncode}")
    return elapsed * 1000


def bench_spawn(n: int, tmp: Path, exits: Exits, env: dict[str, str] | None, tag: str) -> dict:
    """``env`` None inherits ours; otherwise e.g. the bytecode-cache environment."""
    d = tmp / f"spawn-{tag}"
    d.mkdir(parents=True, exist_ok=True)
    # Warm the page cache (and, with a pycache prefix, write the .pyc files); not measured.
    spawn_reference(env)
    spawn_to_initialize(d / "warm" / "data", d / "warm.err", exits, f"spawn {tag} warm-up", env)
    existing = d / "existing" / "data"
    spawn_to_initialize(existing, d / "existing.err", exits, f"spawn {tag} existing (migrate)", env)

    fresh_ms, existing_ms, ref_ms, ready_ms = [], [], [], []
    for i in range(n):  # interleaved, so drift hits all four series alike
        fresh_ms.append(spawn_to_initialize(d / f"fresh{i}" / "data", d / f"fresh{i}.err",
                                            exits, f"spawn {tag} fresh #{i}", env))
        ref_ms.append(spawn_reference(env))
        existing_ms.append(spawn_to_initialize(existing, d / "existing.err", exits,
                                               f"spawn {tag} existing #{i}", env))
        spawn_to_initialize(existing, d / "existing.err", exits, f"spawn {tag} ready #{i}", env, ready_ms)
    return {"fresh": fresh_ms, "existing": existing_ms, "ref": ref_ms, "ready": ready_ms}


def bytecode_env(tmp: Path) -> dict[str, str]:
    """Our environment, but with .pyc files written to (and read from) a private cache, so the
    venv is left untouched: what start-up costs once bytecode is compiled."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


def bytecode_status() -> str:
    site = next((Path(p) for p in sys.path if p.endswith("site-packages")), None)
    pycs = sum(1 for _ in site.rglob("*.pyc")) if site else 0
    pys = sum(1 for _ in site.rglob("*.py")) if site else 0
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    return (f"PYTHONDONTWRITEBYTECODE={flag or '(unset)'}  PYTHONPYCACHEPREFIX={prefix or '(unset)'}  "
            f"venv site-packages: {pycs} .pyc for {pys} .py")


# ---------------------------------------------------------------------------------------------
# 2. Sequential ping latency


def ping_latencies(peer: Peer, n: int, warmup: int, first_id: int) -> list[float]:
    write, read, rfd = os.write, os.read, peer.rfd
    wfd = peer.wfd
    perf = time.perf_counter
    reqs = [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % (first_id + i)
            for i in range(warmup + n)]
    out: list[float] = []
    buf = peer.buf
    for i, req in enumerate(reqs):
        t0 = perf()
        write(wfd, req)
        while b"\n" not in buf:
            chunk = read(rfd, 65536)
            if not chunk:
                raise EOFError("peer closed stdout during the ping loop")
            buf += chunk
        t1 = perf()
        nl = buf.index(b"\n")
        line, buf = buf[:nl], buf[nl + 1:]
        if i >= warmup:
            out.append((t1 - t0) * 1000)
        if i == 0 or i == len(reqs) - 1:  # check a couple of replies (outside the timed part)
            reply = json.loads(line)
            assert reply.get("id") == first_id + i and reply.get("result") == {}, line
    peer.buf = buf
    return out


# ---------------------------------------------------------------------------------------------
# 3. Pipelined throughput


def pipelined(peer: Peer, n: int, first_id: int) -> float:
    payload = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % (first_id + i)
                       for i in range(n))
    start = threading.Event()
    t_first_send = [0.0]
    error: list[BaseException] = []

    def writer() -> None:
        try:
            start.wait()
            view = memoryview(payload)
            t_first_send[0] = time.perf_counter()
            while view:
                view = view[os.write(peer.wfd, view):]
        except BaseException as exc:  # noqa: BLE001 (any failure is the bench's result, re-raised by the caller)
            error.append(exc)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    chunks: list[bytes] = [peer.buf]
    received = peer.buf.count(b"\n")
    start.set()
    read, rfd = os.read, peer.rfd
    while received < n:
        chunk = read(rfd, 1 << 16)
        if not chunk:
            raise EOFError("peer closed stdout during the pipelined run")
        chunks.append(chunk)
        received += chunk.count(b"\n")
    t_last = time.perf_counter()
    thread.join()
    if error:
        raise error[0]
    data = b"".join(chunks)
    lines = data.split(b"\n")
    peer.buf = lines[-1]
    replies = [json.loads(x) for x in lines[:-1]]
    ids = {r["id"] for r in replies if r.get("result") == {}}
    missing = n - len(ids & set(range(first_id, first_id + n)))
    if missing:
        raise RuntimeError(f"{missing} of {n} pipelined pings were not answered with {{}}")
    return n / (t_last - t_first_send[0])


def echo_peer() -> Peer:
    return Peer([PYTHON, "-c", ECHO_LOOP])


def bench_rpc(n_ping: int, warmup: int, n_pipe: int, rounds: int, tmp: Path,
              exits: Exits) -> dict:
    side = Peer(sidecar_argv(tmp / "rpc" / "data"), tmp / "rpc.err")
    side.call(1, "initialize", {"clientInfo": {"name": "bench_rpc", "version": "0"}})
    echo = echo_peer()
    next_id = 100
    lat_side: list[float] = []
    lat_echo: list[float] = []
    # Alternate between the two servers in rounds so a noisy neighbour hits both alike.
    per_round = n_ping // rounds
    for r in range(rounds):
        lat_echo += ping_latencies(echo, per_round, warmup if r == 0 else 20, next_id)
        next_id += per_round + warmup
        lat_side += ping_latencies(side, per_round, warmup if r == 0 else 20, next_id)
        next_id += per_round + warmup

    # Throughput: a short unmeasured warm-up run each, then best-of/median of a few runs.
    pipelined(echo, min(2000, n_pipe), next_id)
    next_id += n_pipe
    pipelined(side, min(2000, n_pipe), next_id)
    next_id += n_pipe
    tp_side: list[float] = []
    tp_echo: list[float] = []
    for _ in range(3):
        tp_echo.append(pipelined(echo, n_pipe, next_id))
        next_id += n_pipe
        tp_side.append(pipelined(side, n_pipe, next_id))
        next_id += n_pipe

    # The sidecar still answers normally after the flood.
    side.call(next_id, "ping")
    exits.record("ping/throughput sidecar", side.shutdown())
    echo.close()
    echo.wait()
    return {"lat_side": lat_side, "lat_echo": lat_echo, "tp_side": tp_side, "tp_echo": tp_echo}


# ---------------------------------------------------------------------------------------------
# 4. Idle RSS and heavy modules


def mapped_heavy_libraries(pid: int) -> list[str]:
    """Cross-check heavy_modules_loaded: extension modules of heavy packages in the memory map."""
    hits = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                for name in ("pydantic_core", "watchfiles", "_yaml", "cryptography", "rpds"):
                    if f"/site-packages/{name}/" in path:
                        hits.add(name)
    except OSError:
        pass
    return sorted(hits)


def bench_rss(tmp: Path, exits: Exits) -> dict:
    side = Peer(sidecar_argv(tmp / "rss" / "data"), tmp / "rss.err")
    side.call(1, "initialize", {"clientInfo": {"name": "bench_rpc", "version": "0"}})
    time.sleep(0.5)  # idle: let start-up garbage settle
    info = side.call(2, "debug/info")["result"]
    vm = vm_rss_bytes(side.pid)
    maps = mapped_heavy_libraries(side.pid)
    exits.record("rss sidecar", side.shutdown())

    ref = Peer([PYTHON, "-c", IDLE_IMPORTS])
    assert ref.read_line() == b"ready"
    time.sleep(0.2)
    ref_vm = vm_rss_bytes(ref.pid)
    ref.write(b"\n")
    ref.wait()
    return {
        "rss_info": info["rssBytes"],
        "rss_vm": vm,
        "ref_vm": ref_vm,
        "heavy_reported": info.get("heavyModulesLoaded", []),
        "mapped": maps,
    }


# ---------------------------------------------------------------------------------------------
# Report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer spawns and calls (smoke run)")
    args = ap.parse_args()

    if args.quick:
        n_spawn, n_ping, warmup, n_pipe, rounds = 5, 500, 100, 5_000, 2
    else:
        n_spawn, n_ping, warmup, n_pipe, rounds = 20, 2_000, 300, 20_000, 4

    tmp = Path(tempfile.mkdtemp(prefix="bench_rpc-"))
    exits = Exits()
    try:
        spawn = bench_spawn(n_spawn, tmp, exits, None, "inherited")
        spawn_pyc = bench_spawn(n_spawn, tmp, exits, bytecode_env(tmp), "pyc")
        rpc = bench_rpc(n_ping, warmup, n_pipe, rounds, tmp, exits)
        rss = bench_rss(tmp, exits)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    rows = Rows()
    add = rows.add

    f_med, e_med, r_med = med(spawn["fresh"]), med(spawn["existing"]), med(spawn["ref"])
    add(f"spawn->initialize reply, median, fresh dir (n={n_spawn})",
        f"{f_med:.1f} ms", f"{r_med:.1f} ms bare import", f"<= {BUDGET_SPAWN_MS:.0f} ms",
        f_med <= BUDGET_SPAWN_MS)
    add("spawn->initialize reply, p90, fresh dir",
        f"{pct(spawn['fresh'], 90):.1f} ms", f"{pct(spawn['ref'], 90):.1f} ms bare import", "-",
        None)
    add(f"spawn->initialize reply, median, existing dir (n={n_spawn})",
        f"{e_med:.1f} ms", f"{r_med:.1f} ms bare import", f"<= {BUDGET_SPAWN_MS:.0f} ms",
        e_med <= BUDGET_SPAWN_MS)
    add("  sidecar minus bare import (median, fresh / existing)",
        f"+{f_med - r_med:.1f} / +{e_med - r_med:.1f} ms", "-", f"existing <= +{BUDGET_SPAWN_OVER_IMPORT_MS:.0f} ms",
        e_med - r_med <= BUDGET_SPAWN_OVER_IMPORT_MS)
    add("  spawn->first answer needing the services (chats/list), median, existing dir",
        f"{med(spawn['ready']):.1f} ms", f"{r_med:.1f} ms bare import", "-", None)
    pf, pe, pr = med(spawn_pyc["fresh"]), med(spawn_pyc["existing"]), med(spawn_pyc["ref"])
    add("spawn->initialize reply, median, fresh dir, bytecode cached",
        f"{pf:.1f} ms", f"{pr:.1f} ms bare import", f"<= {BUDGET_SPAWN_MS:.0f} ms",
        pf <= BUDGET_SPAWN_MS)
    add("spawn->initialize reply, p90, fresh dir, bytecode cached",
        f"{pct(spawn_pyc['fresh'], 90):.1f} ms", f"{pct(spawn_pyc['ref'], 90):.1f} ms bare import",
        "-", None)
    add("spawn->initialize reply, median, existing dir, bytecode cached",
        f"{pe:.1f} ms", f"{pr:.1f} ms bare import", f"<= {BUDGET_SPAWN_MS:.0f} ms",
        pe <= BUDGET_SPAWN_MS)

    ls, le = rpc["lat_side"], rpc["lat_echo"]
    p50s, p50e = pct(ls, 50), pct(le, 50)
    add(f"ping round trip p50 (n={len(ls)} sequential)",
        f"{p50s:.3f} ms", f"{p50e:.3f} ms echo loop", f"<= {BUDGET_PING_P50_MS} ms",
        p50s <= BUDGET_PING_P50_MS)
    add("ping round trip p99",
        f"{pct(ls, 99):.3f} ms", f"{pct(le, 99):.3f} ms echo loop", "-", None)

    tps, tpe = med(rpc["tp_side"]), med(rpc["tp_echo"])
    add(f"pipelined ping throughput (n={n_pipe}, median of 3)",
        f"{tps:,.0f} req/s", f"{tpe:,.0f} req/s echo loop", f">= {BUDGET_THROUGHPUT:,.0f} req/s",
        tps >= BUDGET_THROUGHPUT)

    ri, rv, rr = rss["rss_info"], rss["rss_vm"], rss["ref_vm"]
    ref_txt = f"{rr / MIB:.1f} MiB bare import" if rr else "n/a"
    add("idle RSS after initialize (debug/info rssBytes)",
        f"{ri / MIB:.1f} MiB", ref_txt, f"<= {BUDGET_RSS_MIB:.0f} MiB", ri <= BUDGET_RSS_MIB * MIB)
    if rv is not None:
        add("idle RSS after initialize (/proc VmRSS)",
            f"{rv / MIB:.1f} MiB", ref_txt, f"<= {BUDGET_RSS_MIB:.0f} MiB",
            rv <= BUDGET_RSS_MIB * MIB)
    heavy = [m for m in rss["heavy_reported"] if m in HEAVY]
    add("heavy modules loaded (" + ", ".join(HEAVY) + ")",
        ", ".join(heavy) or "none", "-", "none", not heavy)
    add("clean exits (shutdown + exit -> code 0)",
        f"{exits.total - len(exits.bad)}/{exits.total}", "-", "all", not exits.bad)

    print_header(PYTHON)
    print(f"bytecode {bytecode_status()}")
    print(f"mode     {'--quick' if args.quick else 'full'}   (MiB = 2^20 bytes; 'bytecode cached' rows "
          "run sidecar and reference with PYTHONPYCACHEPREFIX=<tmp> and bytecode writing on)")
    print()
    print_table(rows)
    extra = []
    if rss["heavy_reported"]:
        extra.append(f"debug/info heavyModulesLoaded: {rss['heavy_reported']}")
    if rss["mapped"]:
        extra.append(f"heavy extension libraries mapped in the sidecar: {rss['mapped']}")
    for b in exits.bad:
        extra.append(f"unclean exit: {b}")
    extra.append(misses_line(rows))
    for line in extra:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
