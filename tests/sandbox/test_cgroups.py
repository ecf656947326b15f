"""Finding a usable cgroup (v2 delegated, v1 as root, or none) and sweeping a killed sidecar's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.sandbox import cgroups


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_v1_hierarchies_that_are_writable_are_used(tmp_path: Path) -> None:
    me = write(tmp_path / "self", "9:name=systemd:/\n8:pids:/\n4:memory:/box/7\n0::/\n")
    (tmp_path / "pids").mkdir()
    (tmp_path / "memory" / "box" / "7").mkdir(parents=True)
    found = cgroups.probe(tmp_path, me)
    assert found.kind == "cgroup-v1"
    assert found.bases == {"pids": tmp_path / "pids", "memory": tmp_path / "memory" / "box" / "7"}


def test_v1_without_a_memory_hierarchy_falls_back_to_rlimits(tmp_path: Path) -> None:
    me = write(tmp_path / "self", "8:pids:/\n0::/\n")
    (tmp_path / "pids").mkdir()
    assert cgroups.probe(tmp_path, me).kind == "rlimit"


def test_v2_with_both_controllers_delegated_is_used(tmp_path: Path) -> None:
    me = write(tmp_path / "self", "0::/user.slice/app.scope\n")
    write(tmp_path / "cgroup.controllers", "cpu memory pids\n")
    own = tmp_path / "user.slice" / "app.scope"
    write(own / "cgroup.controllers", "memory pids\n")
    write(own / "cgroup.subtree_control", "")
    found = cgroups.probe(tmp_path, me)
    assert (found.kind, found.bases) == ("cgroup-v2", {"unified": own})
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_v2_without_the_memory_controller_falls_back_to_rlimits(tmp_path: Path) -> None:
    me = write(tmp_path / "self", "0::/app.scope\n")
    write(tmp_path / "cgroup.controllers", "cpu pids\n")
    write(tmp_path / "app.scope" / "cgroup.controllers", "pids\n")
    assert cgroups.probe(tmp_path, me).kind == "rlimit"


def test_a_killed_sidecars_cgroups_are_swept_with_what_runs_in_them() -> None:
    found = cgroups.detect()
    if not found.bases:
        pytest.skip("no cgroup can be used here")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)  # a pid that no longer runs: the sidecar that was killed
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folders = []
        for base in found.bases.values():
            folder = base / f"covalt-{dead}-1"
            folder.mkdir()
            (folder / "cgroup.procs").write_text(str(left.pid))
            folders.append(folder)
        assert found.sweep() == len(folders)
        assert not any(f.exists() for f in folders)
        assert left.wait(timeout=5) == -9
    finally:
        left.kill()
        left.wait()
