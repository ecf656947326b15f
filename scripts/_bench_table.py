"""The table every scripts/bench_*.py prints: metric | sidecar | same-run reference | budget | result."""

from __future__ import annotations

HEADERS = ("metric", "sidecar", "reference (same run)", "budget", "result")


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)]

    def fmt(cells: tuple[str, ...]) -> str:
        return " | ".join(c.ljust(w) if i == 0 else c.rjust(w) if i < 4 else c.ljust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(fmt(HEADERS))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(fmt(r))
    print()
