#!/usr/bin/env python3
"""A big workspace/upload against the real process: how long it holds its chat, and how requests on
that chat fare while it copies, with the same requests on another chat as the same-run reference.

    .venv/bin/python scripts/bench_upload.py [--mib N]

The upload copies without the chat's lock and takes it only to rename the copied files in; the
time it holds the lock comes from the sidecar's own debug log. writeFile latencies on the uploading
chat and on an idle chat are taken at the same moments: what they share (the disk, the CPU) shows
in both, what the lock would add shows only in the first. Prints a table; exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, misses_line, pct, print_header, print_table, run_in_temp_dir  # noqa: E402 (scripts/ on sys.path)

from sidecar.client import SidecarClient  # noqa: E402 (after the sys.path set-up above)

HELD = re.compile(r"put in place and recorded in ([0-9.]+) ms")


async def bench(mib: int, tmp: Path) -> None:
    big = tmp / "big.bin"
    with big.open("wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    rows = Rows()
    async with SidecarClient.spawn(tmp / "data", args=("--log-level", "debug")) as c:
        chats = [(await c.request("chats/create", {"title": t}))["chat"]["id"] for t in ("uploading", "idle")]
        latencies: dict[str, list[float]] = {cid: [] for cid in chats}
        done = anyio.Event()
        took = 0.0

        async def writer(cid: str) -> None:
            n = 0
            while not done.is_set():
                started = time.perf_counter()
                await c.request("workspace/writeFile", {"chatId": cid, "path": f"w{n % 5}.txt", "text": str(n)},
                                timeout=600)
                latencies[cid].append((time.perf_counter() - started) * 1000)
                n += 1
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            for cid in chats:
                tg.start_soon(writer, cid)
            await anyio.sleep(0.3)
            started = time.perf_counter()
            await c.request("workspace/upload", {"chatId": chats[0], "paths": [str(big)]}, timeout=600)
            took = (time.perf_counter() - started) * 1000
            done.set()
        held = [float(m.group(1)) for m in HELD.finditer(c.stderr_text())]
    same, other = latencies[chats[0]], latencies[chats[1]]
    rows.add(f"upload of {mib} MiB, whole request", f"{took:.0f} ms", "", "", None)
    rows.add("  of which the chat's lock is held", f"{held[0]:.1f} ms" if held else "?", "", "<= 50 ms",
             bool(held) and held[0] <= 50)
    for q in (50, 99, 100):
        rows.add(f"writeFile meanwhile, p{q}", f"{pct(same, q):.1f} ms", f"{pct(other, q):.1f} ms (other chat)",
                 "", None)
    print_header(sys.executable)
    print(f"writeFile calls meanwhile: {len(same)} on the uploading chat, {len(other)} on the idle one\n")
    print_table(rows)
    print(misses_line(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512, help="size of the uploaded file (default 512 MiB)")
    args = parser.parse_args()
    run_in_temp_dir("bench-upload-", bench, args.mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
