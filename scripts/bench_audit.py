#!/usr/bin/env python3
"""Benchmark the audit trail (issue 16): ``toolCalls/list`` over 100,000 recorded tool calls.

    .venv/bin/python scripts/bench_audit.py                  100,000 calls, 200 lists per series
    .venv/bin/python scripts/bench_audit.py --calls N        N recorded calls
    .venv/bin/python scripts/bench_audit.py --lists N        N measured lists per series

Budget from issue 16: ``toolCalls/list`` p50 over 100,000 recorded calls <= 10 ms for a filtered
first page (50 calls, the default page size).

The records are written straight into the real schema (the sidecar's own migrations, run by
``Database.open``) with sqlite3, as 30 days of use: 40 chats, 25% of calls outside any chat, 12
toolsets over the four providers (builtin, python, mcp, http: http 3%), 5% errors, started by
the model (60%), the palette, tools/call and 8 schedules (5%), every confirmation kind, small
arguments and a result of about 200 bytes each. Making 100,000 real calls would take the better
part of an hour; what is measured is the read side. Then the real sidecar
(``SidecarClient.spawn``) opens that data directory and each series asks for its first page N
times, the series interleaved round by round so drift hits them alike: p50 and p99 of request ->
response. ``ping`` through the same client in the same rounds is the floor (the RPC hop alone).
Each filter is measured alone (its index) and two combined, plus page 40 (through 39 page tokens:
a keyset page costs what the first does) and the unfiltered first page. Every list returns the
calls it should (checked against a count from sqlite3). Last, ``toolCalls/export`` of every call
to JSON Lines (info: time, size, ``ping`` every 10 ms while it runs, the sidecar's RSS before and
after, as the export streams).

Runs in about a minute on 2 cores. Exits 0 even when a budget is missed (misses are ``FAIL``).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, misses_line, pct, print_header, print_table, run_in_temp_dir, vm_rss_bytes  # noqa: E402 (after the sys.path set-up above)

from sidecar.client import SidecarClient  # noqa: E402 (after the sys.path set-up above)
from sidecar.store import Database  # noqa: E402 (after the sys.path set-up above)

BUDGET_MS = 10.0
DAYS = 30
PROVIDERS = (("builtin", 0.45), ("python", 0.30), ("mcp", 0.22), ("http", 0.03))
STARTERS = (("model", 0.60), ("palette", 0.10), ("api", 0.25), ("schedule", 0.05))
CONFIRMED = ("notNeeded", "userOnce", "userChat", "userAlways", "userDenied", "chatGrant", "alwaysGrant")


def pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([w for w, _ in weighted], [p for _, p in weighted])[0]


def record(rng: random.Random, n: int, total: int, start: datetime) -> tuple[Any, ...]:
    provider = pick(rng, PROVIDERS)
    toolset = None if provider == "builtin" else f"{provider}-set-{rng.randrange(3)}"
    tool = (rng.choice(["write_file", "read_file", "list_files", "run_command"]) if toolset is None
            else f"{toolset}:tool{rng.randrange(6)}")
    if provider == "mcp":
        tool = f"mcp:{toolset}~srv:tool{rng.randrange(6)}"
    by = pick(rng, STARTERS)
    chat = None if by in ("api", "schedule") and rng.random() < 0.9 else f"chat-{rng.randrange(40)}"
    schedule = f"sched-{rng.randrange(8)}" if by == "schedule" else None
    confirmation = (rng.choice(CONFIRMED) if by == "model" else "schedule" if by == "schedule" else None)
    failed = rng.random() < 0.05 or confirmation == "userDenied"
    at = start + timedelta(seconds=DAYS * 86400 * n / total)
    duration = round(rng.lognormvariate(2.5, 1.0), 3)
    started = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    finished = (at + timedelta(milliseconds=duration)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    args = json.dumps({"path": f"src/file{n % 500}.py", "content": "x" * rng.randrange(10, 80)})
    result = None if failed else json.dumps({"ok": True, "bytes": n, "text": "y" * 150})
    return (f"call-{n:08d}", chat, tool, args, result, "error" if failed else "success",
            "tool raised" if failed else None, "raised" if failed else None, started, finished,
            by, schedule, confirmation, toolset, provider, duration)


async def fill(data_dir: Path, total: int) -> None:
    db = await Database.open(data_dir / "sidecar.db")  # the schema the sidecar migrates to
    await db.close()
    rng = random.Random(16)
    start = datetime.now(UTC) - timedelta(days=DAYS)
    with sqlite3.connect(data_dir / "sidecar.db") as conn:
        conn.executemany("INSERT INTO chats (id, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
                         [(f"chat-{i}", f"chat {i}", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
                          for i in range(40)])
        conn.executemany(
            "INSERT INTO tool_calls (id, chat_id, tool_id, args, result, status, error, error_kind, started_at, "
            "finished_at, started_by, schedule_id, confirmation, toolset_id, provider, duration_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record(rng, n, total, start) for n in range(total)))
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def expected(data_dir: Path, where: str) -> int:
    with sqlite3.connect(data_dir / "sidecar.db") as conn:
        return conn.execute(f"SELECT count(*) FROM tool_calls{where}").fetchone()[0]


def day_ago() -> str:
    return (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


# (name, params, SQL giving how many calls match; the page holds min(50, that))
SERIES: list[tuple[str, dict[str, Any], str]] = [
    ("chatId (1 of 40 chats)", {"chatId": "chat-7"}, " WHERE chat_id = 'chat-7'"),
    ("toolsetId", {"toolsetId": "python-set-1"}, " WHERE toolset_id = 'python-set-1'"),
    ("toolId", {"toolId": "read_file"}, " WHERE tool_id = 'read_file'"),
    ("provider http (3%)", {"provider": "http"}, " WHERE provider = 'http'"),
    ("status error (5%)", {"status": "error"}, " WHERE status = 'error'"),
    ("startedBy schedule", {"startedBy": "schedule"}, " WHERE started_by = 'schedule'"),
    ("scheduleId", {"scheduleId": "sched-3"}, " WHERE schedule_id = 'sched-3'"),
    ("confirmation userDenied", {"confirmation": "userDenied"}, " WHERE confirmation = 'userDenied'"),
    ("since (the last day)", {"since": "DAY_AGO"}, " WHERE started_at >= 'DAY_AGO'"),
    ("chatId + status error", {"chatId": "chat-7", "status": "error"},
     " WHERE chat_id = 'chat-7' AND status = 'error'"),
    ("provider mcp + startedBy model + since", {"provider": "mcp", "startedBy": "model", "since": "DAY_AGO"},
     " WHERE provider = 'mcp' AND started_by = 'model' AND started_at >= 'DAY_AGO'"),
]


async def run(total: int, lists: int, tmp: Path) -> tuple[dict[str, list[float]], dict[str, Any]]:
    data_dir = tmp / "data"
    t0 = time.perf_counter()
    await fill(data_dir, total)
    info: dict[str, Any] = {"fill_s": time.perf_counter() - t0}
    since = day_ago()
    series = [(name, {k: (since if v == "DAY_AGO" else v) for k, v in params.items()}, sql.replace("DAY_AGO", since))
              for name, params, sql in SERIES]
    times: dict[str, list[float]] = {name: [] for name, _, _ in series}
    times |= {"no filter": [], "page 40 (keyset)": [], "ping": []}
    async with SidecarClient.spawn(data_dir) as sc:
        for name, params, sql in series:  # each returns what it should
            page = (await sc.request("toolCalls/list", params))["toolCalls"]
            want = min(50, expected(data_dir, sql))
            assert len(page) == want, (name, len(page), want)
        token = None
        for _ in range(39):
            token = (await sc.request("toolCalls/list", {"pageToken": token} if token else {}))["nextPageToken"]
        deep = {"pageToken": token}
        for _ in range(10):  # warm: the page cache, the decoders
            for _, params, _ in series:
                await sc.request("toolCalls/list", params)
        for _ in range(lists):
            for name, params in [*((n, p) for n, p, _ in series), ("no filter", {}), ("page 40 (keyset)", deep)]:
                t = time.perf_counter()
                await sc.request("toolCalls/list", params)
                times[name].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await sc.request("ping")
            times["ping"].append((time.perf_counter() - t) * 1000)
        info["rss_before"] = vm_rss_bytes(sc.proc.pid)
        out = tmp / "all.jsonl"
        pings: list[float] = []
        done: dict[str, Any] = {}

        async def export() -> None:
            t = time.perf_counter()
            done.update(await sc.request("toolCalls/export", {"path": str(out)}, timeout=600))
            info["export_s"] = time.perf_counter() - t

        async with anyio.create_task_group() as tg:
            tg.start_soon(export)
            while not done:  # the UI stays answered while the export runs
                t = time.perf_counter()
                await sc.request("ping")
                pings.append((time.perf_counter() - t) * 1000)
                await anyio.sleep(0.01)
        info["export_pings"] = pings
        info["rss_after"] = vm_rss_bytes(sc.proc.pid)
        info["export_count"], info["export_mb"] = done["count"], out.stat().st_size / 1e6
    return times, info


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--lists", type=int, default=200)
    args = parser.parse_args()
    times, info = run_in_temp_dir("bench_audit-", run, args.calls, args.lists)
    floor = pct(times["ping"], 50)
    rows = Rows()
    for name, values in times.items():
        if name == "ping":
            continue
        p50 = pct(values, 50)
        filtered = name != "no filter"
        rows.add(f"toolCalls/list first page, {name}" if name != "page 40 (keyset)" else f"toolCalls/list {name}",
                 f"{p50:.2f} ms (p99 {pct(values, 99):.2f})", f"ping {floor:.3f} ms",
                 f"<= {BUDGET_MS:g} ms" if filtered else "", p50 <= BUDGET_MS if filtered else None)
    mb = lambda b: f"{b / 1e6:.0f} MB" if b else "?"  # noqa: E731 (a one-line formatter)
    rows.add(f"toolCalls/export of all {info['export_count']:,} calls (jsonl, {info['export_mb']:.0f} MB)",
             f"{info['export_s']:.2f} s", "", "", None)
    pings = info["export_pings"]
    rows.add(f"  ping during the export, p50 / p99 (n={len(pings)})", f"{pct(pings, 50):.2f} / {pct(pings, 99):.2f} ms",
             f"ping {floor:.3f} ms idle", "", None)
    rows.add("  sidecar RSS before / after the export", f"{mb(info['rss_before'])} / {mb(info['rss_after'])}",
             "", "", None)
    print_header(sys.executable)
    print(f"records  {args.calls:,} written in {info['fill_s']:.1f} s; {args.lists} lists per series\n")
    print_table(rows)
    print(misses_line(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
