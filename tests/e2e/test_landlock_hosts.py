"""Under Landlock a tool given ``network: allowedHosts`` gets no network at all (Landlock filters TCP by
port, not by address, so the allowed hosts cannot be told apart): through the real process, the
call's error, tools/get and toolsets/inspect say so and how to get allowedHosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox.detect import detect
from tests.e2e.test_confine import HOSTILE, tool_call
from tests.listeners import recording_listener

pytestmark = pytest.mark.anyio

SANDBOX_SETTINGS = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "sandbox-settings"
SAYS = ("Landlock", "filters TCP by port, not by address", "no network at all", "bubblewrap",
        "unprivileged user namespaces", "sandbox.network")


@pytest.fixture
def landlock() -> None:
    found = detect("landlock")
    if found.mechanism != "landlock" or found.landlock_abi < 4:
        pytest.skip(f"Landlock with TCP rules (ABI 4) cannot run here: {found.warning}")


async def test_allowed_hosts_under_landlock_is_no_network_and_says_why(landlock: None, outer_dir: Path):
    async with recording_listener() as (port, accepted):
        async with SidecarClient.spawn(outer_dir / "data", env={"SIDECAR_SANDBOX": "landlock"}) as sidecar:
            assert (await sidecar.request("debug/info"))["sandbox"]["mechanism"] == "landlock"
            inspected = await sidecar.request("toolsets/inspect", {"path": str(SANDBOX_SETTINGS)})
            quick = next(t for t in inspected["tools"] if t["id"] == "sandbox-settings:quick")
            noted = [w["message"] for w in quick["limitWarnings"] if "Landlock" in w["message"]]
            assert len(noted) == 1 and all(s in noted[0] for s in SAYS), quick["limitWarnings"]
            nap = next(t for t in inspected["tools"] if t["id"] == "sandbox-settings:nap")
            assert not any("Landlock" in w["message"] for w in nap.get("limitWarnings", []))  # no allowedHosts

            await sidecar.request("toolsets/import", {"path": str(HOSTILE)})
            chat = (await sidecar.request("chats/create", {"title": "allowed hosts"}))["chat"]["id"]
            tool = (await sidecar.request("tools/setOverride", {
                "toolsetId": "hostile-confine", "toolId": "connect",
                "sandbox": {"network": "allowedHosts", "allowedHosts": ["127.0.0.1"]}}))["tool"]
            assert tool["limits"]["network"] == "allowedHosts"
            shown = (await sidecar.request("tools/get", {"id": "hostile-confine:connect"}))["tool"]["limits"]
            noted = [w for w in shown["warnings"] if "Landlock" in w["message"]]
            assert len(noted) == 1 and noted[0]["setting"] == "sandbox.network"
            assert all(s in noted[0]["message"] for s in SAYS) and "127.0.0.1" in noted[0]["message"]

            tc = await tool_call(sidecar, "hostile-confine:connect", {"host": "127.0.0.1", "port": port}, chat)
            assert tc["status"] == "error", tc
            assert all(s in tc["error"] for s in SAYS), tc["error"]
            assert "add the host to sandbox.allowedHosts" not in tc["error"]  # it is there already
    assert accepted == []
