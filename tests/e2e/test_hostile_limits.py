"""How a call ends, through the real `python -m sidecar` (issue 15): a call stopped by its timeout
or by the user unwinds (its finally block runs, under a network allow-list too) before everything
of it is killed; a call whose helper process the kernel killed for the call's memory limit says
so; and the sidecar answers ping within 50 ms throughout."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox import cgroups
from sidecar.sandbox.detect import detect
from tests.e2e.test_confine import Pinger
from tests.e2e.test_hostile_worker import PING_BOUND, running_with
from tests.timing import speed_bound

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "hostile-limits"
# (mechanism, tool): `unwind` runs under network allowedHosts (bubblewrap puts egress's bridge
# first in its sandbox), `unwind_offline` with no network.
STOPS = [("bubblewrap", "unwind"), ("bubblewrap", "unwind_offline"), ("landlock", "unwind_offline"),
         ("none", "unwind_offline")]
WARM = {"child_hog": {"megabytes": 1}, "escape_cgroup": {"helpers": 0}}


class Limits:
    def __init__(self, sidecar: SidecarClient, chat_id: str, workspace: Path) -> None:
        self.sidecar, self.chat_id, self.workspace = sidecar, chat_id, workspace

    def params(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"toolId": f"hostile-limits:{tool}", "args": args, "chatId": self.chat_id}

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return (await self.sidecar.request("tools/call", self.params(tool, args)))["toolCall"]


@pytest.fixture
async def limits(request: pytest.FixtureRequest, data_dir: Path, tmp_path: Path) -> AsyncIterator[Limits]:
    mechanism, tool = request.param
    found = detect(mechanism)
    if found.mechanism != mechanism:
        pytest.skip(f"{mechanism} cannot run here: {found.warning}")
    folder = tmp_path / "hostile-limits"
    shutil.copytree(FIXTURE, folder)
    async with SidecarClient.spawn(data_dir, env={"SIDECAR_SANDBOX": mechanism}) as sidecar:
        await sidecar.request("toolsets/import", {"path": str(folder)})
        chat = (await sidecar.request("chats/create", {"title": "limits"}))["chat"]
        here = Limits(sidecar, chat["id"], Path(chat["workspacePath"]))
        # A worker's cold start is bench_tools.py's budget, not what these tests measure.
        warm = await here.call(tool, WARM.get(tool, {"marker": "warm", "seconds": 0}))
        assert warm["status"] == "success", (warm.get("errorKind"), warm.get("error"))
        pinger = Pinger(sidecar)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pinger.run)
            yield here
            tg.cancel_scope.cancel()
        # Within 50 ms throughout, judged as test_confine does: one outlier is this test descheduled
        # on the shared machine; a sidecar held up by a tool delays every ping sent meanwhile.
        times = sorted(pinger.times)
        assert len(times) > 5 and times[-2] < PING_BOUND and times[-1] < speed_bound(0.25), \
            f"pings took {[round(t * 1000, 1) for t in times[-3:]]} ms while tools misbehaved"


async def eventually(check: Any, within: float = 5.0) -> Any:
    """``check()`` once it is truthy, or its last value after ``within`` seconds; on a thread, so
    reading /proc never holds up the pinger's answers."""
    with anyio.move_on_after(within):
        while not (value := await anyio.to_thread.run_sync(check)):  # noqa: ASYNC110 - polls files and /proc
            await anyio.sleep(0.02)
        return value
    return await anyio.to_thread.run_sync(check)


@pytest.mark.parametrize(("limits", "tool"), [(s, s[1]) for s in STOPS], indirect=["limits"],
                         ids=[f"{m}-{t}" for m, t in STOPS])
async def test_a_timed_out_call_unwinds_before_it_is_killed(limits: Limits, tool: str):
    marker = f"unwound-{uuid.uuid4().hex}"
    stopped = await limits.call(tool, {"marker": marker})
    assert stopped["status"] == "error" and stopped["errorKind"] == "timeout", stopped
    assert (limits.workspace / marker).exists(), f"the stopped tool's finally block did not run: {stopped}"
    assert await eventually(lambda: not running_with(marker)), "a process of the call outlived it"


@pytest.mark.parametrize(("limits", "tool"), [(s, s[1]) for s in STOPS], indirect=["limits"],
                         ids=[f"{m}-{t}" for m, t in STOPS])
async def test_a_cancelled_call_unwinds_before_it_is_killed(limits: Limits, tool: str):
    marker = f"unwound-{uuid.uuid4().hex}"
    request_id = limits.sidecar.new_id()
    answer = limits.sidecar.expect(request_id)
    await limits.sidecar.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                               "params": limits.params(tool, {"marker": marker, "seconds": 30})})
    assert await eventually((limits.workspace / f"{marker}.running").exists, within=10.0)
    assert running_with(marker), "the tool's helper process is not running"
    await limits.sidecar.notify("$/cancelRequest", {"id": request_id})
    stopped = await answer(10)
    assert stopped["error"]["code"] == -32800, stopped  # answered at once; the call unwinds meanwhile
    assert await eventually((limits.workspace / marker).exists), "the stopped tool's finally block did not run"
    assert await eventually(lambda: not running_with(marker)), "a process of the call outlived it"


@pytest.mark.parametrize("limits", [("bubblewrap", "child_hog")], indirect=True, ids=["bubblewrap"])
async def test_a_helper_killed_for_the_calls_memory_fails_the_call_on_the_memory_limit(limits: Limits):
    if cgroups.detect().kind == "rlimit":
        pytest.skip("no memory cgroup here: each process has its own memory rlimit, nothing kills for the call's total")
    # Three helpers of 40 MB each stay under their own 64 MB rlimit, not under the call's 64 MB together.
    failed = await limits.call("child_hog", {"megabytes": 40, "helpers": 3})
    assert failed["status"] == "error" and failed["errorKind"] == "limit", failed
    assert "memory limit" in failed["error"] and "64 MiB" in failed["error"] and "sandbox.memory" in failed["error"]
    assert "a helper failed with code -9" in failed["error"]  # what the tool said stays in the message
    # A tool that handled its helper's end keeps its answer: what it returns is its own account of it.
    handled = await limits.call("child_hog", {"megabytes": 40, "helpers": 3, "handle": True})
    assert handled["status"] == "success", handled
    assert -9 in handled["result"]["codes"]
    # One helper asking for 1 GB meets its own memory rlimit first (a MemoryError in it, no kill):
    # the tool's error quotes it, and the sidecar says which setting raises the limit.
    alone = await limits.call("child_hog", {"megabytes": 1024})
    assert alone["status"] == "error" and alone["errorKind"] == "raised", alone
    assert "MemoryError" in alone["error"] and "64 MiB" in alone["error"] and "sandbox.memory" in alone["error"]


@pytest.mark.parametrize("limits", [("landlock", "escape_cgroup")], indirect=True, ids=["landlock"])
async def test_under_landlock_a_tool_cannot_leave_its_cgroup_and_its_limits_hold(limits: Limits):
    # As root without bubblewrap's namespaces, the cgroup files are the tool's to write but for
    # Landlock, which lets it write only its workspace (and its own group's cgroup.procs).
    found = cgroups.detect()
    if found.kind == "rlimit":
        pytest.skip("no cgroup is used here: there is nothing to leave")
    got = await limits.call("escape_cgroup", {})
    assert got["status"] == "success", got
    attempts = got["result"]["attempts"]
    assert attempts and all(outcome in ("Permission denied", "No such file or directory")
                            for outcome in attempts.values()), attempts
    assert any(outcome == "Permission denied" for outcome in attempts.values())
    # The folders whose cgroup.procs hold the call's pid, in the hierarchies that limit it.
    limiting = [str(cgroups.ROOT if c == "unified" else cgroups.ROOT / c) for c in found.bases]
    groups = [g for g in got["result"]["groups"] if any(g == root or g.startswith(root + "/") for root in limiting)]
    assert len(groups) == len(found.bases) and all(os.path.basename(g).startswith("covalt-") for g in groups), groups
    assert -9 in got["result"]["codes"], got["result"]  # 3 x 40 MB in a 64 MB group: the kernel killed one
