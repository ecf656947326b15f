"""Per-tool configuration through the real process: a secret config value reaches the tool and
nothing else, not a response, a notification, an export or a log line at debug level."""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

WEATHER = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "weather"
KEY = "wk-live-4e8a1c7f02b94d3e"


@pytest.fixture
async def sidecar(data_dir: Path) -> AsyncIterator[SidecarClient]:
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug"),
                                   env={"SIDECAR_SECRETS_BACKEND": "file"}) as client:
        yield client
    assert client.proc.returncode == 0, client.stderr_text()


async def test_a_secret_config_value_reaches_the_tool_and_nothing_else(sidecar: SidecarClient, tmp_path: Path):
    seen: list[Any] = []

    async def ask(method: str, params: dict[str, Any]) -> Any:
        reply = await sidecar.request_raw(method, params)
        seen.append(reply)
        return reply.get("result")

    await ask("toolsets/import", {"path": str(WEATHER)})
    await ask("config/set", {"toolsetId": "weather", "values": {"api_key": KEY + "\n"}})
    await ask("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"units": "metric"}})
    await ask("config/get", {"toolsetId": "weather"})
    await ask("config/test", {"toolsetId": "weather"})
    await ask("tools/list", {})
    await ask("toolsets/get", {"id": "weather"})
    ok = await ask("tools/call", {"toolId": "weather:forecast", "args": {"city": "Gozo"}})
    assert ok["toolCall"]["result"]["keyLength"] == len(KEY)  # the tool had it, stripped of the newline

    echoed = await ask("tools/call", {"toolId": "weather:echo_key", "args": {}})
    assert echoed["toolCall"]["result"] == "my key is ****"  # a tool echoing its key: masked
    raised = await ask("tools/call", {"toolId": "weather:echo_key", "args": {"fail": True}})
    assert raised["toolCall"]["status"] == "error"
    assert "Authorization: Bearer ****" in raised["toolCall"]["error"]

    chat = (await ask("chats/create", {}))["chat"]["id"]
    await ask("providers/set", {"id": "model", "kind": "scripted", "config": {"script": [
        {"text": "asking", "toolCalls": [{"tool": "weather_echo_key", "args": {}},
                                         {"tool": "weather_echo_key", "args": {"fail": True}}]},
        {"text": "done"}]}})
    await ask("chat/send", {"chatId": chat, "content": "what is your key?", "provider": "model"})
    await ask("chats/get", {"id": chat})
    await ask("chat/invokeTool", {"chatId": chat, "toolId": "weather:echo_key", "args": {}})
    export = tmp_path / "weather.zip"
    await ask("toolsets/export", {"id": "weather", "path": str(export)})
    await sidecar.request("shutdown")

    wire = json.dumps(seen) + json.dumps(sidecar.notifications)
    assert "my key is ****" in wire and KEY not in wire
    with zipfile.ZipFile(export) as z:
        assert not any(KEY.encode() in z.read(n) for n in z.namelist())
    log = sidecar.stderr_text()
    assert "config of toolset weather set: api_key" in log  # the log is there, at debug level ...
    assert "echo_key: calling the API with ****" in log  # with what the worker printed ...
    assert KEY not in log  # ... and holds no secret


async def test_the_configuration_outlives_a_restart(data_dir: Path):
    env = {"SIDECAR_SECRETS_BACKEND": "file"}
    async with SidecarClient.spawn(data_dir, env=env) as sc:
        await sc.request("toolsets/import", {"path": str(WEATHER)})
        await sc.request("config/set", {"toolsetId": "weather", "values": {"api_key": KEY}})
        await sc.request("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"units": "metric"}})
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug"), env=env) as sc:
        tools = {t["id"]: t for t in (await sc.request("tools/list"))["tools"]}
        assert tools["weather:forecast"]["status"] == "connected"
        call = (await sc.request("tools/call", {"toolId": "weather:forecast", "args": {"city": "Gozo"}}))["toolCall"]
        assert call["result"]["keyLength"] == len(KEY) and call["result"]["units"] == "metric"
        echoed = (await sc.request("tools/call", {"toolId": "weather:echo_key", "args": {}}))["toolCall"]
        assert echoed["result"] == "my key is ****"  # read back from the store, it is masked as before
        await sc.request("shutdown")
        assert KEY not in sc.stderr_text()
