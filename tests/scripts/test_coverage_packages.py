"""scripts/coverage_packages.py: coverage per package from ``coverage json``, and the floor."""

from __future__ import annotations

import json
from pathlib import Path

import coverage_packages
import pytest


def summary(statements: int, covered: int, branches: int, covered_branches: int) -> dict:
    return {"summary": {"num_statements": statements, "covered_lines": covered, "num_branches": branches,
                        "covered_branches": covered_branches, "num_partial_branches": branches - covered_branches}}


def report(tmp_path: Path, files: dict[str, dict]) -> str:
    path = tmp_path / "coverage.json"
    path.write_text(json.dumps({"files": files}))
    return str(path)


def test_files_add_up_per_package_and_the_top_level_modules_count_as_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coverage_packages, "floor", lambda: 90.0)
    path = report(tmp_path, {
        "sidecar/rpc/engine.py": summary(100, 95, 20, 19),
        "sidecar/rpc/framing.py": summary(100, 100, 0, 0),
        "sidecar/tools/providers/python/workers.py": summary(50, 45, 10, 5),
        "sidecar/app.py": summary(10, 10, 2, 2),
        "sidecar/compose.py": summary(10, 9, 0, 0),
    })
    assert coverage_packages.main(["coverage_packages.py", path]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert rows["sidecar/rpc"][1:] == ["200", "5", "20", "1", "97.5%", "95.0%", "97.3%"]
    assert rows["sidecar/tools"][1:] == ["50", "5", "10", "5", "90.0%", "50.0%", "83.3%"]
    assert rows["sidecar/*.py"][1:] == ["20", "1", "2", "0", "95.0%", "100.0%", "95.5%"]
    # The total counts lines and branches together, as coverage's own total does: 285 of 302.
    assert rows["TOTAL"][-1] == "94.4%"


def test_a_total_under_the_floor_fails_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coverage_packages, "floor", lambda: 90.0)
    path = report(tmp_path, {"sidecar/rpc/engine.py": summary(100, 80, 20, 10)})
    assert coverage_packages.main(["coverage_packages.py", path]) == 1
    assert "coverage 75.00% is under the floor of 90% (fail_under in pyproject.toml)" in capsys.readouterr().out


def test_the_floor_is_pyprojects_fail_under() -> None:
    assert coverage_packages.floor() >= 85
