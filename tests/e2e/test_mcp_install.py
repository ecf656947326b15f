"""A package runner's first start through the real sidecar process: installTimeout on the wire,
mcpServers/status notifications with status installing and install progress, mcpServers/prepare."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.mcp_host.test_install import fake_npx, fifo, open_gate

pytestmark = pytest.mark.anyio

KEY = "pkg~pkg"


def _installing(params: Any, lines: int) -> bool:
    server = params["server"]
    return (server["id"] == KEY and server["status"] == "installing"
            and server.get("install", {}).get("lines", 0) >= lines)


async def test_a_runner_reports_installing_on_the_wire_and_prepare_waits_for_it(sidecar: SidecarClient,
                                                                                tmp_path: Path) -> None:
    gate = fifo(tmp_path)
    added = await sidecar.request("mcpServers/add", {
        "id": "pkg", "command": fake_npx(tmp_path), "args": ["-y", "fake-pkg"], "installTimeout": 120,
        "connectTimeout": 5, "env": {"FAKE_LINES": "3", "FAKE_GATE": str(gate),
                                     "npm_config_cache": str(tmp_path / "cache")}})
    assert added["server"]["installTimeout"] == 120
    seen = await sidecar.wait_notification("mcpServers/status", lambda p: _installing(p, 3), timeout=60)
    server = seen["params"]["server"]
    assert server["runner"] == "npx"
    install = server["install"]
    assert (install["runner"], install["package"], install["budgetMs"]) == ("npx", "fake-pkg", 120_000)
    assert install["message"] == "npm http fetch GET 200 fake-pkg part 2"
    assert install["cache"].startswith(str(tmp_path / "cache" / "_npx") + "/")
    listed = next(s for s in (await sidecar.request("mcpServers/list"))["servers"] if s["id"] == KEY)
    assert listed["status"] == "installing" and listed["install"]["package"] == "fake-pkg"
    async with anyio.create_task_group() as tg:
        prepared: dict[str, Any] = {}

        async def prepare() -> None:
            prepared.update(await sidecar.request("mcpServers/prepare", {"id": KEY}, timeout=120))

        tg.start_soon(prepare)
        await open_gate(gate)
    assert prepared["server"]["status"] == "connected" and "install" not in prepared["server"]


async def test_prepare_of_a_disabled_runner_says_why_it_failed(sidecar: SidecarClient, tmp_path: Path) -> None:
    await sidecar.request("mcpServers/add", {
        "id": "pkg", "command": fake_npx(tmp_path), "args": ["-y", "fake-pkg"],
        "env": {"FAKE_FAIL_ONCE": str(tmp_path / "failed"), "npm_config_cache": str(tmp_path / "cache")}})
    await sidecar.request("mcpServers/setEnabled", {"id": KEY, "enabled": False})
    # A fresh "fails once" for prepare alone (the enabled start may have used the first).
    await sidecar.request("mcpServers/update", {"id": KEY, "env": {
        "FAKE_FAIL_ONCE": str(tmp_path / "failed-for-prepare"), "npm_config_cache": str(tmp_path / "cache")}})
    with pytest.raises(RemoteError) as failed:
        await sidecar.request("mcpServers/prepare", {"id": KEY}, timeout=120)
    assert failed.value.code == -32020 and "ECONNRESET" in failed.value.data["message"]
    warmed = await sidecar.request("mcpServers/prepare", {"id": KEY}, timeout=120)
    assert warmed["server"]["status"] == "disabled"


async def test_an_import_gives_its_runner_servers_the_install_timeout(app: SidecarClient, tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {
        "memory": {"command": fake_npx(tmp_path), "args": ["-y", "fake-pkg"],
                   "env": {"npm_config_cache": str(tmp_path / "cache")}},
        "plain": {"command": sys.executable, "args": [str(Path(__file__).parents[1] / "fixtures/mcp/basic.py")]},
    }}))
    added = await app.request("mcpServers/import", {"path": str(config), "ids": ["memory", "plain"],
                                                    "installTimeout": 900})
    by_id = {s["id"]: s for s in added["servers"]}
    assert by_id["memory~memory"]["installTimeout"] == 900
    assert "installTimeout" not in by_id["plain~plain"]  # run directly: nothing to install
    bad = await app.request_raw("mcpServers/import", {"path": str(config), "ids": ["plain"],
                                                      "installTimeout": 3601})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["path"] == "params.installTimeout"
