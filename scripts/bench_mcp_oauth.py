#!/usr/bin/env python3
"""Benchmark OAuth for remote MCP servers (issue 17): sign-in time, and a tool call with OAuth on.

    .venv/bin/python scripts/bench_mcp_oauth.py            full run (about 20 s on 2 cores)
    .venv/bin/python scripts/bench_mcp_oauth.py --quick    smaller run (a smoke test)

The servers are ``tests/fixtures/mcp/oauth_server.py``: an authorization server and a protected
streamable-HTTP MCP server built with the SDK's server-side auth, on 127.0.0.1. The sidecar is the
real process (``SidecarClient.spawn``, secrets in the file backend); the UI's ``ui/openUrl`` is
answered as a browser would (fetch the page, follow its redirect to the loopback callback).

1. Sign-in: ``mcpServers/login`` request -> its answer, which comes once the server is connected
   again with the new token (discovery, registration on the first one, the browser step, the code
   exchange, the reconnect, the tool list). The first sign-in (with the dynamic registration) is its
   own row; then N times ``mcpServers/logout`` (unmeasured) and a measured ``mcpServers/login``.
   Reference: the same server's connect (``mcpServers/reconnect`` -> ``connected``), token cached.
2. Warm tool call with OAuth on (token cached): ``tools/call`` of ``echo``, N sequential calls after a
   warm-up, p50/p99; vs the SDK alone (``streamable_http_client`` + ``ClientSession``) on the same
   server sending the same token as a static bearer header; and the same server added a second time
   with that header (OAuth off), so OAuth's own share is visible. Interleaved in rounds of 10.
                                                  budget: sidecar p50 - SDK p50 <= 1 ms
Times use ``time.perf_counter``. The script exits 0 even when a budget is missed (misses say FAIL).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, misses_line, pct, print_header, print_table, run_in_temp_dir  # noqa: E402  (scripts/ is on sys.path when run as a script)

from sidecar.client import SidecarClient  # noqa: E402
from tests.procs import served  # noqa: E402  (a fixture server in its own process group)

PYTHON = sys.executable
FIXTURE = ROOT / "tests" / "fixtures" / "mcp" / "oauth_server.py"
KEY = "remote~remote"
BUDGET_ADDED_P50_MS = 1.0


@asynccontextmanager
async def oauth_servers():
    async with served([PYTHON, str(FIXTURE)]) as (_, rs, _auth):
        yield f"http://127.0.0.1:{int(rs)}/mcp"


async def browser(params: dict[str, Any]) -> dict[str, Any]:
    import httpx2  # loaded with the SDK anyway

    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as c:
        (await c.get(params["url"])).raise_for_status()
    return {"opened": True}


async def status(sc: SidecarClient, *wanted: str) -> str:
    with anyio.fail_after(30):
        while True:
            found = next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == KEY)
            if found["status"] in wanted:
                return found["status"]
            await anyio.sleep(0.005)


async def timed(coro: Any) -> float:
    t0 = time.perf_counter()
    await coro
    return (time.perf_counter() - t0) * 1000


async def login(sc: SidecarClient) -> None:
    server = (await sc.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]
    if server["status"] != "connected":
        raise RuntimeError(f"sign-in did not connect: {server}")


async def reconnect(sc: SidecarClient) -> None:
    await sc.request("mcpServers/reconnect", {"id": KEY})
    await status(sc, "connected")


async def run_all(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out: dict[str, Any] = {"logins": [], "reconnects": [], "side": [], "static": [], "sdk": []}
    async with oauth_servers() as url, SidecarClient.spawn(tmp / "data", args=("--secrets-backend", "file")) as sc:
        sc.handle("ui/openUrl", browser)
        await sc.request("mcpServers/add", {"id": "remote", "type": "streamable-http", "url": url})
        await status(sc, "needsAuth")
        out["first"] = await timed(login(sc))
        for _ in range(args.logins):
            await sc.request("mcpServers/logout", {"id": KEY})
            await status(sc, "needsAuth")
            out["logins"].append(await timed(login(sc)))
            out["reconnects"].append(await timed(reconnect(sc)))

        secrets = json.loads((tmp / "data" / "secrets.json").read_text())["secrets"]
        token = json.loads(secrets[f"mcp-oauth:{KEY}"])["tokens"]["access_token"]
        call = {"toolId": f"mcp:{KEY}:echo", "args": {"text": "hi"}}
        # The same server through the sidecar with OAuth off: its own Authorization header.
        await sc.request("mcpServers/add", {"id": "static", "type": "streamable-http", "url": url,
                                            "headers": {"Authorization": f"Bearer {token}"}})
        with anyio.fail_after(30):
            while next(s for s in (await sc.request("mcpServers/list"))["servers"]
                       if s["id"] == "static~static")["status"] != "connected":
                await anyio.sleep(0.01)
        static = {"toolId": "mcp:static~static:echo", "args": {"text": "hi"}}
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as client, \
                streamable_http_client(url, http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for _ in range(args.warmup):
                await sc.request("tools/call", call)
                await sc.request("tools/call", static)
                await session.call_tool("echo", {"text": "hi"})
            for _ in range(args.calls // 10):
                for _ in range(10):
                    out["side"].append(await timed(sc.request("tools/call", call)))
                for _ in range(10):
                    out["static"].append(await timed(sc.request("tools/call", static)))
                for _ in range(10):
                    out["sdk"].append(await timed(session.call_tool("echo", {"text": "hi"})))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sign-ins and calls (smoke run)")
    args = ap.parse_args()
    args.logins, args.calls, args.warmup = (3, 100, 20) if args.quick else (10, 500, 50)

    t_start = time.perf_counter()
    got = run_in_temp_dir("bench_mcp_oauth-", run_all, args)
    wall = time.perf_counter() - t_start

    med = statistics.median
    rows = Rows()
    logins, reconnects = got["logins"], got["reconnects"]
    rows.add("first sign-in: login -> connected (with dynamic registration)", f"{got['first']:.0f} ms",
             "-", "-", None)
    rows.add(f"sign-in: login -> connected, median (n={len(logins)})", f"{med(logins):.0f} ms",
             f"{med(reconnects):.0f} ms reconnect, token cached", "-", None)
    rows.add("sign-in, max", f"{max(logins):.0f} ms", f"{max(reconnects):.0f} ms reconnect", "-", None)
    s50, r50 = pct(got["side"], 50), pct(got["sdk"], 50)
    rows.add(f"MCP tool call over OAuth (echo, token cached), p50 (n={len(got['side'])})", f"{s50:.2f} ms",
             f"{r50:.3f} ms SDK alone, static bearer", "-", None)
    rows.add("MCP tool call over OAuth, p99", f"{pct(got['side'], 99):.2f} ms",
             f"{pct(got['sdk'], 99):.3f} ms SDK alone", "-", None)
    rows.add("  added at p50 (sidecar p50 - SDK p50)", f"+{s50 - r50:.2f} ms", "-",
             f"<= {BUDGET_ADDED_P50_MS:.0f} ms", s50 - r50 <= BUDGET_ADDED_P50_MS)
    t50 = pct(got["static"], 50)
    rows.add("same call through the sidecar, OAuth off (static header), p50", f"{t50:.2f} ms",
             f"{r50:.3f} ms SDK alone", "-", None)
    rows.add("  OAuth's own cost at p50 (OAuth p50 - static p50)", f"{s50 - t50:+.2f} ms", "-", "-", None)

    print_header(PYTHON)
    print(f"mode     {'--quick' if args.quick else 'full'}  sign-ins={args.logins}, calls={args.calls} "
          f"per series in rounds of 10, warm-up {args.warmup}; servers: tests/fixtures/mcp/oauth_server.py")
    print()
    print_table(rows)
    print(misses_line(rows))
    print(f"wall time: {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
