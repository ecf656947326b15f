"""How a call ends, through the real `python -m sidecar` (issue 15): a call stopped by its timeout
or by the user unwinds (its finally block runs, under a network allow-list too) before everything
of it is killed, and the sidecar answers ping within 50 ms throughout."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox.detect import detect
from tests.e2e.test_hostile_worker import PING_BOUND, Pinger, running_with

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "hostile-limits"
# (mechanism, tool): `unwind` runs under network allowedHosts (bubblewrap puts egress's bridge
# first in its sandbox), `unwind_offline` with no network.
STOPS = [("bubblewrap", "unwind"), ("bubblewrap", "unwind_offline"), ("landlock", "unwind_offline"),
         ("none", "unwind_offline")]


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
        warm = await here.call(tool, {"marker": "warm", "seconds": 0})
        assert warm["status"] == "success", (warm.get("errorKind"), warm.get("error"))
        pinger = Pinger(sidecar)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pinger.run)
            yield here
            tg.cancel_scope.cancel()
        assert pinger.count > 0
        assert pinger.worst < PING_BOUND, f"a ping took {pinger.worst * 1000:.1f} ms while tools misbehaved"


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
