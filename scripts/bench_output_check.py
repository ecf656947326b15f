#!/usr/bin/env python3
"""Benchmark the check of a tool's result against its output schema (issue 14 part 7).

    .venv/bin/python scripts/bench_output_check.py            20 rounds per series
    .venv/bin/python scripts/bench_output_check.py --rounds N

A 1 MB result (7,000 rows of a msgspec-described dataclass, the schema a Python tool's return
annotation gets: named types under $defs) is checked: by the quick check the sidecar compiles
(sidecar/tools/validate.py) against jsonschema's own validator in the same run; then the longest
time the event loop went without running while ``result_schema.check`` ran (it moves a result that
big to a thread) against checking the same result inline on the loop. A ticker task sleeping
1 ms measures the gaps. No budget is set in ARCHITECTURE.md; the loop gap should stay near the
interpreter's thread switch interval (5 ms) rather than the whole check's time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402 (after the sys.path set-up above)
from _bench import pct, print_header, print_table  # noqa: E402 (after the sys.path set-up above)

from sidecar.tools import result_schema  # noqa: E402 (after the sys.path set-up above)

ROW = {"type": "object", "title": "Row", "required": ["id", "name", "tags"],
       "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                      "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                      "tags": {"type": "array", "items": {"type": "string"}}}}
SCHEMA = {"$ref": "#/$defs/Report", "$defs": {
    "Row": ROW,
    "Report": {"type": "object", "title": "Report", "required": ["rows"],
               "properties": {"rows": {"type": "array", "items": {"$ref": "#/$defs/Row"}}}}}}


def result(n: int = 7_000) -> dict[str, Any]:
    return {"rows": [{"id": i, "name": f"row {i} " + "x" * 60, "score": i / 7, "tags": ["a", "b"]}
                     for i in range(n)]}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


async def longest_gap(work: Any) -> float:
    """The longest the loop went between two 1 ms ticks while ``work`` ran."""
    gaps: list[float] = []
    done = anyio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.01)
        await work()
        done.set()
    return max(gaps)


async def main(rounds: int) -> None:
    from jsonschema import Draft202012Validator
    from referencing import Registry

    value = result()
    size = len(json.dumps(value))
    print_header(sys.executable)
    print(f"result: {size / 1e6:.2f} MB of JSON, {len(value['rows'])} rows\n")
    reference = Draft202012Validator(SCHEMA, registry=Registry())
    assert result_schema.problem(SCHEMA, value) is None and reference.is_valid(value)
    ours, theirs = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        result_schema.problem(SCHEMA, value)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        reference.is_valid(value)
        theirs.append(time.perf_counter() - t)
    off, inline = [], []
    for _ in range(rounds):
        async def checked() -> None:
            assert await result_schema.check(SCHEMA, "python", value, size) is None

        async def on_loop() -> None:
            result_schema.problem(SCHEMA, value)

        off.append(await longest_gap(checked))
        inline.append(await longest_gap(on_loop))
    print_table([
        ("check of a 1 MB valid result, p50", ms(pct(ours, 50)), ms(pct(theirs, 50)) + " (jsonschema)", "-", "-"),
        ("longest loop gap while checking, p50", ms(pct(off, 50)), ms(pct(inline, 50)) + " (inline)", "-", "-"),
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    anyio.run(main, parser.parse_args().rounds)
