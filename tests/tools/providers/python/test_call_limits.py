"""Per-call limits of the worker (real worker processes, the hostile-worker fixture's tools): the
disk quota, processes and memory, each failing only its own call with the limit it passed."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.sandbox import cgroups
from sidecar.sandbox.policy import Confinement
from sidecar.tools.providers.python.workers import Limits, ToolFailure, ToolsetWorkers

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "toolsets" / "hostile-worker"
SMALL = Confinement(disk_bytes=8 << 20, memory_bytes=64 << 20, max_processes=8)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[ToolsetWorkers]:
    folder = tmp_path / "hostile-worker"
    shutil.copytree(FIXTURE, folder)
    p = ToolsetWorkers("hostile-worker", folder, Limits())
    yield p
    await p.aclose()


def call(pool: ToolsetWorkers, workspace: Path, name: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
    context = {"workspace": str(workspace), "chatId": "chat-1", "toolCallId": "call-1"}
    return pool.call(name, f"tools.hostile:{name}", args or {}, context=context, confinement=SMALL, **kw)


async def failure(awaitable: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await awaitable
    return info.value


def used(folder: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


async def test_one_5_gb_file_stops_at_the_disk_quota(pool: ToolsetWorkers, workspace: Path) -> None:
    exc = await failure(call(pool, workspace, "flood", {"files": 1, "megabytes": 5 << 10}))
    assert (exc.kind, exc.limit) == ("limit", "disk")
    assert "disk limit" in exc.message and "8 MiB per call" in exc.message and "sandbox.disk" in exc.message
    assert used(workspace) <= 8 << 20
    assert await call(pool, workspace, "ping") == "pong"


async def test_5_gb_in_many_small_files_stops_soon_after_the_disk_quota(pool: ToolsetWorkers, workspace: Path) -> None:
    # Each file is under the per-file limit: only the check of the workspace's growth stops it.
    exc = await failure(call(pool, workspace, "flood", {"files": 5 << 8, "megabytes": 4}))
    assert (exc.kind, exc.limit) == ("limit", "disk")
    assert "8 MiB per call" in exc.message and "sandbox.disk" in exc.message
    assert "flood-" in exc.message and "are kept" in exc.message  # what it wrote, named for the user
    # Checked every 25 ms: what it writes in between is over the quota, bounded far below 5 GB.
    assert used(workspace) < 1 << 30
    assert await call(pool, workspace, "ping") == "pong"


async def test_a_fork_bomb_stops_at_the_process_limit(pool: ToolsetWorkers, workspace: Path) -> None:
    if cgroups.detect().kind == "rlimit":
        pytest.skip("no pids cgroup here: only the timeout stops a fork bomb run as root")
    before = await call(pool, workspace, "ping")
    exc = await failure(call(pool, workspace, "bomb", timeout=20))
    assert (exc.kind, exc.limit) == ("limit", "processes")
    assert "8 processes" in exc.message and "sandbox.processes" in exc.message
    assert await call(pool, workspace, "ping") == before


async def test_10_gb_stops_at_the_memory_limit(pool: ToolsetWorkers, workspace: Path) -> None:
    exc = await failure(call(pool, workspace, "hog"))
    assert (exc.kind, exc.limit) == ("limit", "memory")
    assert "64 MiB" in exc.message and "sandbox.memory" in exc.message
    assert await call(pool, workspace, "ping") == "pong"


async def test_a_workers_cgroup_is_removed_when_it_stops(pool: ToolsetWorkers, workspace: Path) -> None:
    found = cgroups.detect()
    if not found.bases:
        pytest.skip("no cgroup can be used here")

    def ours() -> set[Path]:
        return {p for base in found.bases.values() for p in base.glob(f"covalt-{os.getpid()}-*")}

    before = ours()
    assert await call(pool, workspace, "ping") == "pong"
    assert len(ours() - before) == len(found.bases)  # one folder per hierarchy for this worker
    await pool.aclose()
    assert ours() <= before
