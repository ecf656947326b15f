"""Branch coverage per package from ``coverage json``, and the floor: scripts/coverage_packages.py FILE.json

A package is a folder under sidecar/ (sidecar/rpc, sidecar/tools, ...); the modules directly in
sidecar/ count as one, ``sidecar/*.py``. The floor is ``fail_under`` in pyproject.toml's
[tool.coverage.report] (what ``coverage report`` applies too): exit status 1 under it.
"""

from __future__ import annotations

import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    statements: int = 0
    covered_lines: int = 0
    branches: int = 0
    covered_branches: int = 0
    partial: int = 0

    def add(self, summary: dict[str, int]) -> None:
        self.statements += summary["num_statements"]
        self.covered_lines += summary["covered_lines"]
        self.branches += summary["num_branches"]
        self.covered_branches += summary["covered_branches"]
        self.partial += summary["num_partial_branches"]

    def row(self, name: str) -> str:
        return (f"{name:<22} {self.statements:>6} {self.statements - self.covered_lines:>6} {self.branches:>6}"
                f" {self.branches - self.covered_branches:>6} {_pct(self.covered_lines, self.statements):>7}"
                f" {_pct(self.covered_branches, self.branches):>7} {_pct(*self.total()):>7}")

    def total(self) -> tuple[int, int]:
        """Covered and measured, as coverage counts its total: lines and branches together."""
        return self.covered_lines + self.covered_branches, self.statements + self.branches


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def package(path: str) -> str:
    top, *within = Path(path).parts
    return f"{top}/{within[0]}" if len(within) > 1 else f"{top}/*.py"


def floor() -> float:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return float(config["tool"]["coverage"]["report"]["fail_under"])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: scripts/coverage_packages.py FILE.json (from coverage json)", file=sys.stderr)
        return 2
    files: dict[str, dict[str, dict[str, int]]] = json.loads(Path(argv[1]).read_text())["files"]
    packages: dict[str, Tally] = {}
    whole = Tally()
    for path, data in files.items():
        packages.setdefault(package(path), Tally()).add(data["summary"])
        whole.add(data["summary"])
    print(f"{'package':<22} {'stmts':>6} {'miss':>6} {'branch':>6} {'bmiss':>6}"
          f" {'lines':>7} {'branch':>7} {'total':>7}")
    for name in sorted(packages):
        print(packages[name].row(name))
    print(whole.row("TOTAL"))
    covered, measured = whole.total()
    percent = 100 * covered / measured if measured else 0.0
    least = floor()
    if percent < least:
        print(f"coverage {percent:.2f}% is under the floor of {least:g}% (fail_under in pyproject.toml)")
        return 1
    print(f"coverage {percent:.2f}%, floor {least:g}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
