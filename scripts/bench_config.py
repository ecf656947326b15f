#!/usr/bin/env python3
"""Benchmark what per-tool configuration (seed 004) adds to a Python tool call.

    .venv/bin/python scripts/bench_config.py             500 measured calls per series
    .venv/bin/python scripts/bench_config.py --calls N   N measured calls per series

Budget from issue 12: reading a secret through the store on a warm path adds <= 0.2 ms p50 to a
tool call.

Through the real sidecar (``SidecarClient.spawn``, the secret store on its file backend), two
copies of the weather example toolset are imported: ``weather`` with its config schema (a secret
``api_key`` set with ``config/set``, plus the defaults it fills) and ``plain`` with no schema at
all. After a warm-up, ``tools/call`` of each one's ``clock`` tool (no chat: a scratch folder) runs
N times, the two series interleaved (alternating which goes first) so drift hits them alike; p50
of request -> response, and the median of the per-round differences. That difference is what the
configuration costs a call: the readiness check, the secret read (cached in the store after its
first read), the merged settings in the payload, and the scan of the result for the secret value.
On a machine busy with other work the difference swings by a few tenths of a millisecond between
runs: run it a few times.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, pct, print_header, print_table, run_in_temp_dir  # noqa: E402 (after the sys.path set-up above)

from sidecar.client import SidecarClient  # noqa: E402 (after the sys.path set-up above)

WEATHER = ROOT / "tests" / "fixtures" / "toolsets" / "weather"
BUDGET_MS = 0.2


PLAIN = """manifest_version: "1"
id: plain
name: Plain
tools:
  - id: clock
    entrypoint: tools.weather:clock
"""


def plain_copy(tmp: Path) -> Path:
    """The weather toolset's code under the id ``plain``, with no config_schema at all."""
    folder = tmp / "plain"
    shutil.copytree(WEATHER, folder)
    (folder / "toolset.yaml").write_text(PLAIN)
    return folder


async def run(calls: int, tmp: Path) -> dict[str, list[float]]:
    plain = plain_copy(tmp)
    async with SidecarClient.spawn(tmp / "data", env={"SIDECAR_SECRETS_BACKEND": "file"}) as sc:
        await sc.request("toolsets/import", {"path": str(WEATHER)})
        await sc.request("toolsets/import", {"path": str(plain)})
        await sc.request("config/set", {"toolsetId": "weather", "values": {"api_key": "k" * 40}})
        series: dict[str, list[float]] = {"weather:clock": [], "plain:clock": []}
        for _ in range(30):  # warm workers, caches and the secret store
            for tool in series:
                await sc.request("tools/call", {"toolId": tool, "args": {}})
        order = list(series)
        for _ in range(calls):
            order.reverse()  # neither series always goes first
            for tool in order:
                t0 = time.perf_counter()
                await sc.request("tools/call", {"toolId": tool, "args": {}})
                series[tool].append((time.perf_counter() - t0) * 1000)
        await sc.request("shutdown")
    return series


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    series = run_in_temp_dir("bench_config-", run, args.calls)
    configured, plain = pct(series["weather:clock"], 50), pct(series["plain:clock"], 50)
    # The median of the per-round differences: drift between rounds (other load on the machine)
    # cancels out, which the difference of two medians does not do.
    added = pct([w - p for w, p in zip(series["weather:clock"], series["plain:clock"], strict=True)], 50)
    rows = Rows()
    rows.add("tools/call p50, configured tool (secret + defaults)", f"{configured:.3f} ms", f"{plain:.3f} ms", "", None)
    rows.add("added by configuration (median of paired differences)", f"{added:.3f} ms", "same tool, no schema",
             f"<= {BUDGET_MS} ms",
             added <= BUDGET_MS)
    print_header(sys.executable)
    print_table(rows)
    return 0 if added <= BUDGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
