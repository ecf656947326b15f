"""Hostile Python tools against their own worker, through the real `python -m sidecar` (issue 15):
forged answers, a fork bomb, 10 GB of memory, children and a setsid daemon left behind, zombies and
a call that sleeps for ever. Each fails only its own call with an error that names the limit, the
sidecar answers `ping` within 50 ms throughout, and no process of a call is alive after it ends."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox import cgroups
from tests.timing import speed_bound

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "hostile-worker"
PING_BOUND = speed_bound(0.050)  # seconds: the bound on a ping's answer while tools misbehave


class Pinger:
    """Pings the sidecar every 10 ms while the test runs; keeps the slowest answer."""

    def __init__(self, sidecar: SidecarClient) -> None:
        self.sidecar = sidecar
        self.worst = 0.0
        self.count = 0

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            assert await self.sidecar.request("ping") == {}
            self.worst = max(self.worst, time.perf_counter() - started)
            self.count += 1
            await anyio.sleep(0.01)


@pytest.fixture
async def hostile(sidecar: SidecarClient, tmp_path: Path) -> AsyncIterator[tuple[SidecarClient, str, Pinger]]:
    folder = tmp_path / "hostile-worker"
    shutil.copytree(FIXTURE, folder)
    await sidecar.request("toolsets/import", {"path": str(folder)})
    chat_id = (await sidecar.request("chats/create", {"title": "hostile"}))["chat"]["id"]
    # Warm first: a worker's cold start is bench_tools.py's budget, not what the attacks measure.
    assert (await call(sidecar, chat_id, "ping"))["result"] == "pong"
    pinger = Pinger(sidecar)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pinger.run)
        yield sidecar, chat_id, pinger
        tg.cancel_scope.cancel()
    assert pinger.count > 0
    assert pinger.worst < PING_BOUND, f"a ping took {pinger.worst * 1000:.1f} ms while tools misbehaved"


async def call(sidecar: SidecarClient, chat_id: str, tool: str, args: dict[str, Any] | None = None) -> dict:
    params = {"toolId": f"hostile-worker:{tool}", "args": args or {}, "chatId": chat_id}
    return (await sidecar.request("tools/call", params))["toolCall"]


# -- processes, read from /proc --------------------------------------------------------------------


def table() -> dict[int, tuple[int, str, bytes]]:
    """pid -> (parent pid, state, command line) of every process."""
    found: dict[int, tuple[int, str, bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        found[int(entry.name)] = (int(fields[1]), fields[0].decode(), cmdline)
    return found


def below(procs: dict[int, tuple[int, str, bytes]], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def running_with(token: str) -> list[int]:
    """Live processes whose command line holds ``token`` (a zombie runs nothing)."""
    return [pid for pid, (_, state, cmd) in table().items() if token.encode() in cmd and state not in "ZX"]


def worker_leftovers(sidecar: SidecarClient) -> list[str]:
    """What runs below each toolset worker besides its one spare (the next call's process)."""
    procs = table()

    def is_worker(pid: int) -> bool:  # python -I .../worker_process, not the bwrap that starts it
        argv = procs.get(pid, (0, "", b""))[2].split(b"\0")
        return len(argv) > 2 and argv[1] == b"-I" and argv[2].endswith(b"worker_process")

    workers = [pid for pid in below(procs, sidecar.proc.pid) if is_worker(pid) and not is_worker(procs[pid][0])]
    assert workers, "no toolset worker is running"
    found = []
    for worker in workers:
        rest = below(procs, worker)
        zombies = [pid for pid in rest if procs[pid][1] == "Z"]
        if zombies or len(rest) > 1:
            found.append(f"worker {worker}: {len(rest)} processes below it, {len(zombies)} zombies")
    return found


async def settled(check: Any, within: float = 2.0) -> Any:
    """``check()`` once it is falsy (the kill of a call's processes is done before its answer, but
    a process's exit is not instant), or its last value."""
    with anyio.move_on_after(within):
        while value := check():  # noqa: ASYNC110 - polls /proc: no event says a process has gone
            await anyio.sleep(0.02)
        return value
    return check()


# -- the attacks -----------------------------------------------------------------------------------


async def test_a_forged_answer_is_never_taken_for_the_calls_own(hostile: tuple[SidecarClient, str, Pinger]):
    sidecar, chat_id, _ = hostile
    for _ in range(3):  # the ids it guesses would have matched the first calls' with a counter
        forged = await call(sidecar, chat_id, "forge")
        assert forged["status"] == "success", forged
        assert forged["result"]["real"] is True
    assert (await call(sidecar, chat_id, "ping"))["result"] == "pong"


async def test_a_fork_bomb_fails_its_call_on_the_process_limit_and_the_toolset_serves_on(
    hostile: tuple[SidecarClient, str, Pinger],
):
    sidecar, chat_id, _ = hostile
    bombed = await call(sidecar, chat_id, "bomb")
    assert bombed["status"] == "error"
    if cgroups.detect().kind == "rlimit":  # without a pids cgroup only the timeout ends it
        assert bombed["errorKind"] in ("limit", "timeout")
    else:
        assert bombed["errorKind"] == "limit", bombed
        assert "processes limit" in bombed["error"] and "64 processes" in bombed["error"]
        assert "sandbox.processes" in bombed["error"]
    assert not await settled(lambda: worker_leftovers(sidecar))
    assert (await call(sidecar, chat_id, "ping"))["result"] == "pong"
    assert not await settled(lambda: worker_leftovers(sidecar))


async def test_allocating_10_gb_fails_on_the_memory_limit(hostile: tuple[SidecarClient, str, Pinger]):
    sidecar, chat_id, _ = hostile
    hog = await call(sidecar, chat_id, "hog")
    assert hog["status"] == "error" and hog["errorKind"] == "limit", hog
    assert "memory limit" in hog["error"] and "256 MiB" in hog["error"] and "sandbox.memory" in hog["error"]
    assert (await call(sidecar, chat_id, "ping"))["result"] == "pong"


async def test_children_and_daemons_do_not_outlive_their_call(hostile: tuple[SidecarClient, str, Pinger]):
    sidecar, chat_id, _ = hostile
    token = f"hostile-{uuid.uuid4().hex}"
    left = await call(sidecar, chat_id, "orphan", {"token": token})
    assert left["status"] == "success"
    assert not await settled(lambda: running_with(token))

    daemon = await call(sidecar, chat_id, "daemon", {"token": token})
    assert daemon["status"] == "success" and daemon["result"]["started"] is True
    assert not await settled(lambda: running_with(token))
    log = anyio.Path(daemon["result"]["log"])
    size = (await log.stat()).st_size
    await anyio.sleep(0.35)  # three and a half of its 100 ms turns
    assert (await log.stat()).st_size == size, "the daemon still writes into the workspace after its call"

    assert (await call(sidecar, chat_id, "zombies", {"n": 20}))["result"] == 20
    assert not await settled(lambda: worker_leftovers(sidecar))


async def test_a_call_that_sleeps_for_ever_is_stopped_with_its_children(hostile: tuple[SidecarClient, str, Pinger]):
    sidecar, chat_id, _ = hostile
    token = f"hostile-{uuid.uuid4().hex}"
    slept = await call(sidecar, chat_id, "sleeper", {"token": token})
    assert slept["status"] == "error" and slept["errorKind"] == "timeout"
    assert "within 1 s" in slept["error"] and "constraints.timeout_seconds" in slept["error"]
    assert not await settled(lambda: running_with(token))
    assert not await settled(lambda: worker_leftovers(sidecar))
    assert (await call(sidecar, chat_id, "ping"))["result"] == "pong"
