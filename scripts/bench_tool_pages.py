#!/usr/bin/env python3
"""Benchmark tools/list paging (issue 14): the first page of a 5,000-tool catalog.

    .venv/bin/python scripts/bench_tool_pages.py                 4,500 stored + 500 MCP tools, 200 lists per series
    .venv/bin/python scripts/bench_tool_pages.py --lists N       N measured lists per series

Budget from issue 14: ``tools/list`` first page <= 5 ms with 5,000 tools from 100 toolsets and
MCP servers.

90 toolsets of 50 Python tools each are written straight into the real schema (the sidecar's own
migrations, run by ``Database.open``), a third of them with usage; then the real sidecar
(``SidecarClient.spawn``) opens that data directory and connects 10 real MCP servers
(tests/fixtures/mcp/many.py) of 50 tools each. Each series asks N times, interleaved round by
round: the first page at the default size (100) and at 50, page 30 (through 29 tokens: a keyset
page costs what the first does), one toolset, disabled ones included, tools/get. ``ping`` in the
same rounds is the floor. The reference: the whole catalog read page after page at the largest
size (500), what a caller that wants everything pays, and what every tools/list cost before paging.

Runs in about a minute on 2 cores. Exits 0 even when a budget is missed (misses are ``FAIL``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, misses_line, pct, print_header, print_table, run_in_temp_dir  # noqa: E402 (after the sys.path set-up above)

from sidecar.client import SidecarClient  # noqa: E402 (after the sys.path set-up above)
from sidecar.store import Database  # noqa: E402 (after the sys.path set-up above)

BUDGET_MS = 5.0
TOOLSETS, PER_TOOLSET = 90, 50
SERVERS, PER_SERVER = 10, 50
MANY = ROOT / "tests" / "fixtures" / "mcp" / "many.py"
NOW = "2026-11-23T00:00:00.000000Z"


async def fill(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    db = await Database.open(data_dir / "sidecar.db")
    await db.close()
    schema = json.dumps({"type": "object", "properties": {"q": {"type": "string", "description": "what to find"}}})
    with sqlite3.connect(data_dir / "sidecar.db") as conn:
        conn.executemany(
            "INSERT INTO toolsets (id, name, description, source_type, installed_at, updated_at) "
            "VALUES (?, ?, 'a toolset', 'local', ?, ?)",
            [(f"set-{s:03d}", f"Set {s:03d}", NOW, NOW) for s in range(TOOLSETS)])
        conn.executemany(
            "INSERT INTO tools (tool_id, toolset_id, provider, name, description, input_schema, entrypoint) "
            "VALUES (?, ?, 'python', ?, ?, ?, ?)",
            [(f"set-{s:03d}:tool_{t:03d}", f"set-{s:03d}", f"tool_{t:03d}", f"does thing {t} of set {s}", schema,
              f"tools.m:tool_{t:03d}") for s in range(TOOLSETS) for t in range(PER_TOOLSET)])
        conn.executemany("INSERT INTO tool_usage (tool_id, call_count, last_called_at) VALUES (?, ?, ?)",
                         [(f"set-{s:03d}:tool_{t:03d}", t + 1, NOW)
                          for s in range(0, TOOLSETS, 3) for t in range(PER_TOOLSET)])


async def run(lists: int, tmp: Path) -> tuple[dict[str, list[float]], dict[str, Any]]:
    data_dir = tmp / "data"
    await fill(data_dir)
    info: dict[str, Any] = {}
    async with SidecarClient.spawn(data_dir) as sc:
        for i in range(SERVERS):
            await sc.request("mcpServers/add", {"id": f"many-{i:02d}", "command": sys.executable,
                                                "args": [str(MANY), str(PER_SERVER)]})
        with anyio.fail_after(120):
            while sum(s.get("toolCount", 0) for s in (await sc.request("mcpServers/list"))["servers"]
                      if s["status"] == "connected") < SERVERS * PER_SERVER:
                await anyio.sleep(0.1)
        t = time.perf_counter()
        everything: list[dict[str, Any]] = []
        token = None
        while True:
            page = await sc.request("tools/list", {"pageSize": 500} | ({"pageToken": token} if token else {}))
            everything += page["tools"]
            if (token := page.get("nextPageToken")) is None:
                break
        info["all_ms"], info["count"] = (time.perf_counter() - t) * 1000, len(everything)
        ids = [x["id"] for x in everything]
        assert ids == sorted(set(ids)), "tools/list pages out of order or repeated"
        info["mcp"] = sum(1 for x in everything if x["provider"] == "mcp")
        deep = None
        for _ in range(29):
            deep = (await sc.request("tools/list", {"pageSize": 100} | ({"pageToken": deep} if deep else {})))[
                "nextPageToken"]
        series: dict[str, tuple[str, dict[str, Any]]] = {
            "first page (100, the default)": ("tools/list", {}),
            "first page of 50": ("tools/list", {"pageSize": 50}),
            "page 30 (keyset)": ("tools/list", {"pageToken": deep}),
            "one toolset (toolsetIds)": ("tools/list", {"toolsetIds": ["set-045"]}),
            "includeDisabled": ("tools/list", {"includeDisabled": True}),
            "tools/get with usage": ("tools/get", {"id": "set-045:tool_010"}),
            "ping": ("ping", {}),
        }
        times: dict[str, list[float]] = {name: [] for name in series}
        for _ in range(10):  # warm: caches, decoders
            for method, params in series.values():
                await sc.request(method, params)
        for _ in range(lists):
            for name, (method, params) in series.items():
                t = time.perf_counter()
                await sc.request(method, params)
                times[name].append((time.perf_counter() - t) * 1000)
    return times, info


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--lists", type=int, default=200)
    args = parser.parse_args()
    times, info = run_in_temp_dir("bench_tool_pages-", run, args.lists)
    floor = pct(times.pop("ping"), 50)
    rows = Rows()
    for name, values in times.items():
        p50 = pct(values, 50)
        judged = name.startswith("first page")
        rows.add(f"tools/list {name}" if not name.startswith("tools/") else name,
                 f"{p50:.2f} ms (p99 {pct(values, 99):.2f})", f"ping {floor:.3f} ms",
                 f"<= {BUDGET_MS:g} ms" if judged else "", p50 <= BUDGET_MS if judged else None)
    rows.add(f"every tool, page after page of 500 ({info['count']:,})", f"{info['all_ms']:.1f} ms", "", "", None)
    print_header(sys.executable)
    print(f"catalog  {info['count']:,} tools: {TOOLSETS * PER_TOOLSET:,} stored in {TOOLSETS} toolsets, "
          f"{info['mcp']} from {SERVERS} MCP servers, the rest built in; {args.lists} lists per series\n")
    print_table(rows)
    print(misses_line(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
