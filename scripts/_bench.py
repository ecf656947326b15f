"""What every scripts/bench_*.py shares: statistics, process memory, a temporary folder to run in,
and the table it prints (metric | sidecar | same-run reference | budget | result)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

HEADERS = ("metric", "sidecar", "reference (same run)", "budget", "result")


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)]

    def fmt(cells: tuple[str, ...]) -> str:
        return " | ".join(c.ljust(w) if i == 0 else c.rjust(w) if i < 4 else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    print(fmt(HEADERS))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(fmt(r))
    print()


def misses_line(rows: list[tuple[str, ...]], *more: str) -> str:
    """The report's last verdict: every row marked FAIL, then `more` (an unclean exit, ...)."""
    misses = [r[0].strip() for r in rows if r[4].startswith("FAIL")] + list(more)
    return "budget misses: " + ("; ".join(misses) if misses else "none")


def pct(values: list[float], q: float) -> float:
    """Percentile q (0..100) with linear interpolation between closest ranks."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def process_children() -> dict[int, list[int]]:
    """Every process's children now, by parent pid (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now (servers, their children, a sandbox's)."""
    children = process_children()
    found: set[int] = set()
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.add(p)
        todo += children.get(p, [])
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is as good as gone: its parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def wait_gone(pids: Iterable[int], limit: float = 10.0) -> list[int]:
    """Wait until every pid is gone; the ones still alive after ``limit`` seconds."""
    with anyio.move_on_after(limit):
        while any(alive(p) for p in pids):  # noqa: ASYNC110 - no event says a process is gone: /proc is polled
            await anyio.sleep(0.02)
    return sorted(p for p in pids if alive(p))


class Run:
    """What every part of a bench records besides its timings: exit codes and the processes it started."""

    def __init__(self) -> None:
        self.exits_total = 0
        self.bad_exits: list[str] = []
        self.pids: set[int] = set()

    def exit(self, what: str, code: int) -> None:
        self.exits_total += 1
        if code != 0:
            self.bad_exits.append(f"{what}: exit code {code}")


class StatusWatch:
    """Times of ``mcpServers/status`` notifications, taken as a SidecarClient's read loop sees them."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.connected: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        client.on_notification = self._on

    def _on(self, message: dict[str, Any]) -> None:
        if message.get("method") != "mcpServers/status":
            return
        server = message["params"]["server"]
        if server["status"] == "connected":
            self.connected.setdefault(server["id"], time.perf_counter())
        elif server["status"] == "error":
            self.errors[server["id"]] = server.get("error") or "error"

    def done(self, keys: list[str]) -> bool:
        failed = [k for k in keys if k in self.errors and k not in self.connected]
        if failed:
            raise RuntimeError(f"MCP server {failed[0]} failed: {self.errors[failed[0]]}")
        return all(k in self.connected for k in keys)

    async def until_connected(self, keys: list[str], limit: float = 120) -> float:
        """The time the last of ``keys`` was seen connected (and mcpServers/list agrees)."""
        await self.client.wait_for(lambda: self.done(keys), limit)
        listed = {s["id"]: s for s in (await self.client.request("mcpServers/list"))["servers"]}
        for k in keys:
            if listed[k]["status"] != "connected":
                raise RuntimeError(f"notified connected but listed as {listed[k]}")
        return max(self.connected[k] for k in keys)


def tree_rss_bytes(pid: int) -> int | None:
    """The memory of ``pid`` and every process below it: a sandboxed worker is bwrap, its
    namespace's init, the Python worker and the next call's child forked from it. Proportional
    set size (Pss), so pages the child shares with the worker count once, not twice as VmRSS would."""
    children = process_children()
    total, todo, seen = 0, [pid], False
    while todo:
        rss = _pss_bytes(current := todo.pop())
        if rss is not None:
            total, seen = total + rss, True
        todo += children.get(current, [])
    return total if seen else None


def _pss_bytes(pid: int) -> int | None:
    return _kib_field(f"/proc/{pid}/smaps_rollup", "Pss:")


def vm_rss_bytes(pid: int) -> int | None:
    return _kib_field(f"/proc/{pid}/status", "VmRSS:")


def _kib_field(path: str, key: str) -> int | None:
    """A '<key> <n> kB' line of a /proc file, in bytes; None once the process is gone."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def verdict(ok: bool | None) -> str:
    return "info" if ok is None else ("PASS" if ok else "FAIL <<<")


class Rows(list):
    """The table's rows; ``add`` judges one against its budget (``ok`` None: info only)."""

    def add(self, metric: str, sidecar: str, ref: str, budget: str, ok: bool | None) -> None:
        self.append((metric, sidecar, ref, budget, verdict(ok)))


def print_header(python: str) -> None:
    """When, where and with what a bench ran: figures drift between machines and runs."""
    import datetime
    import os
    import platform

    now = datetime.datetime.now().astimezone()
    print(f"date     {now:%Y-%m-%d %H:%M:%S %Z}")
    print(f"machine  {platform.node()}  nproc={os.cpu_count()} (affinity "
          f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'})  "
          f"{platform.machine()}  {platform.system()} {platform.release()}")
    print(f"python   {platform.python_implementation()} {platform.python_version()}  ({python})")


def run_in_temp_dir(prefix: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``anyio.run(fn, *args, tmp)`` in a fresh temporary folder, removed afterwards whatever happens."""
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as tmp:
        return anyio.run(fn, *args, Path(tmp))
