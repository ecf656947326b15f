#!/usr/bin/env python3
"""What the destination guard of HTTP tools (sidecar/tools/providers/http/guard.py) adds to a request,
against plain httpx2 in the same run, both against one local server.

    .venv/bin/python scripts/bench_http_guard.py           full run (a few seconds)
    .venv/bin/python scripts/bench_http_guard.py --quick   smaller run (a smoke test)

1. A GET on a kept-alive connection through the guarded transport vs httpx2's own transport: the
   guard's per-request work is the name check (no DNS). Interleaved, p50 of each.
                                                         budget: added p50 <= 0.1 ms
2. A GET on a new connection each time (``Connection: close``): the guard also classifies the
   resolved addresses and connects to them. The resolver is a constant (this measures the guard,
   not DNS), and the reference connects to the same address literal.
                                                         budget: added p50 <= 0.3 ms
3. Building a transport (what a tool's first call pays): p50.            info
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts._bench import Rows, misses_line, pct, print_header, print_table  # noqa: E402 -- after the path
from sidecar.tools.providers.http.guard import Destinations  # noqa: E402 -- after the path


def serve() -> int:
    """A minimal keep-alive HTTP/1.1 server on 127.0.0.1 in threads: answers every request 'ok'."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)

    def handle(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                close = False
                while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
                    close |= line.lower().startswith(b"connection: close")
                if not line:
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                             + (b"Connection: close\r\n" if close else b"") + b"\r\nok")
                if close:
                    return

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


async def timed(client: Any, url: str, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    response = await client.get(url, headers=headers)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.status_code
    return elapsed


async def main(quick: bool) -> list[tuple[str, ...]]:
    import httpx2  # deferred like in the sidecar (and so the header prints first)

    port = serve()
    rounds = 200 if quick else 2000

    async def constant(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    guard = Destinations(["api.test", "127.0.0.1"], resolver=constant)
    rows = Rows()
    for label, headers, budget in (("kept-alive connection", {}, 0.1),
                                   ("new connection each time", {"Connection": "close"}, 0.3)):
        guarded_times: list[float] = []
        plain_times: list[float] = []
        async with httpx2.AsyncClient(transport=guard.transport(trust_env=False), trust_env=False) as guarded, \
                httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(trust_env=False), trust_env=False) as plain:
            for _ in range(20):  # warm both pools and code paths
                await timed(guarded, f"http://api.test:{port}/", headers)
                await timed(plain, f"http://127.0.0.1:{port}/", headers)
            for _ in range(rounds):
                guarded_times.append(await timed(guarded, f"http://api.test:{port}/", headers))
                plain_times.append(await timed(plain, f"http://127.0.0.1:{port}/", headers))
        g, p = pct(guarded_times, 50) * 1000, pct(plain_times, 50) * 1000
        rows.add(f"GET, {label}: guarded p50 (added)", f"{g:.3f} ms ({g - p:+.3f})", f"{p:.3f} ms",
                 f"added <= {budget} ms", g - p <= budget)
    builds: list[float] = []
    for _ in range(20 if quick else 100):
        started = time.perf_counter()
        guard.transport(trust_env=False)
        builds.append(time.perf_counter() - started)
    rows.add("building a guarded transport, p50", f"{pct(builds, 50) * 1000:.3f} ms", "-", "-", None)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    print_header(sys.executable)
    table = anyio.run(main, options.quick)
    print_table(table)
    print(misses_line(table))
