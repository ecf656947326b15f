"""Per-tool configuration (seed 004) through the app: config/get|set|delete|test, tool status, the
fail-fast of unconfigured tools on every path, settings and telemetry in a Python tool, export and
upgrade."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import RemoteError, SidecarClient

pytestmark = pytest.mark.anyio

WEATHER = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "weather"
KEY = "wk-9f3b7c1d5e2a4b6c8d0e"  # distinct enough to grep for
UNITS = "si-units-q7"



def weather_copy(tmp_path: Path, name: str = "weather", edit: tuple[str, str] | None = None) -> Path:
    folder = tmp_path / name
    shutil.copytree(WEATHER, folder)
    if edit is not None:
        manifest = folder / "toolset.yaml"
        text = manifest.read_text()
        assert edit[0] in text
        manifest.write_text(text.replace(*edit))
    return folder


async def statuses(app: SidecarClient) -> dict[str, str]:
    tools = (await app.request("tools/list", {"includeDisabled": True}))["tools"]
    return {t["id"]: t["status"] for t in tools}


async def configured(app: SidecarClient) -> None:
    await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": KEY}})
    await app.request("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"units": UNITS}})


async def test_status_goes_from_available_to_connected_as_the_required_keys_get_values(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    before = await statuses(app)
    assert before["write_file"] == "system"
    assert {k: v for k, v in before.items() if k.startswith("weather:")} == {
        "weather:forecast": "available", "weather:clock": "available", "weather:echo_key": "available"}
    forecast = (await app.request("tools/get", {"id": "weather:forecast"}))["tool"]
    assert forecast["missingConfig"] == ["api_key", "units"]

    got = await app.request("config/get", {"toolsetId": "weather"})
    assert got["status"] == "available"
    assert got["fields"] == [
        {"key": "api_key", "description": "Your API key", "type": "string", "secret": True, "required": True},
        {"key": "endpoint", "description": "API endpoint URL", "type": "string", "secret": False,
         "required": False, "default": "https://api.example.com"}]
    test = await app.request("config/test", {"toolsetId": "weather", "toolId": "forecast"})
    assert test["ok"] is False and test["missing"] == ["api_key", "units"]
    assert 'config/set {"toolsetId": "weather", "values": {"api_key": ...}}' in test["message"]
    assert '"toolId": "forecast", "values": {"units": ...}' in test["message"]

    assert await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": KEY}}) == \
        {"status": "connected"}  # the toolset's own fields are complete
    mid = await statuses(app)
    assert (mid["weather:clock"], mid["weather:forecast"]) == ("connected", "available")
    done = await app.request("config/set", {"toolsetId": "weather", "toolId": "weather:forecast",
                                            "values": {"units": "metric"}})
    assert done == {"status": "connected"}
    assert (await statuses(app))["weather:forecast"] == "connected"
    assert await app.request("config/test", {"toolsetId": "weather", "toolId": "forecast"}) == \
        {"ok": True, "message": "Configuration looks complete", "missing": []}

    shown = await app.request("config/get", {"toolsetId": "weather"})
    assert shown["fields"][0]["value"] == "****" and shown["fields"][0]["isSet"] is True
    assert KEY not in json.dumps(shown)

    # Deleting a required key makes the tool available again.
    assert await app.request("config/delete", {"toolsetId": "weather", "toolId": "forecast", "key": "units"}) == \
        {"status": "available"}
    assert (await app.request("tools/get", {"id": "weather:forecast"}))["tool"]["missingConfig"] == ["units"]


async def test_a_python_tool_reads_its_settings_and_the_telemetry_the_ui_gave(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await configured(app)
    await app.request("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"days": 5}})
    context = {"timezone": "Europe/Malta", "locale": "en-MT", "lat": 35.8762, "lon": 14.5366, "city": "Valletta"}
    call = (await app.request("tools/call", {"toolId": "weather:forecast", "args": {"city": "Mdina"},
                                             "clientContext": context}))["toolCall"]
    assert call["status"] == "success", call
    result = call["result"]
    # The toolset's fields, then the tool's own; defaults fill what was not set.
    assert result["keys"] == ["api_key", "days", "endpoint", "units"]
    assert (result["endpoint"], result["units"], result["days"], result["keyLength"]) == \
        ("https://api.example.com", UNITS, 5, len(KEY))
    telemetry = result["telemetry"]
    assert set(telemetry) == {"time", "timezone", "locale", "language", "lat", "lon", "city", "country"}
    assert (telemetry["city"], telemetry["lat"], telemetry["timezone"]) == ("Valletta", 35.8762, "Europe/Malta")
    assert telemetry["country"] is None and telemetry["language"] is None  # always there, null when not given
    assert telemetry["time"].endswith("Z")  # the sidecar's clock when the UI gave no time

    bare = (await app.request("tools/call", {"toolId": "weather:clock", "args": {}}))["toolCall"]["result"]
    assert bare["city"] is None and bare["time"]


async def test_unconfigured_tools_fail_fast_on_every_path(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    with pytest.raises(RemoteError) as err:
        await app.request("tools/call", {"toolId": "weather:forecast", "args": {"city": "Rabat"}})
    assert err.value.code == -32011
    assert err.value.data == {"reason": "not configured", "toolsetId": "weather", "toolId": "weather:forecast",
                              "missing": ["api_key", "units"]}
    assert "api_key, units have no value" in err.value.message and "config/set" in err.value.message

    chat = (await app.request("chats/create", {}))["chat"]["id"]
    with pytest.raises(RemoteError) as err:  # the "+" palette
        await app.request("chat/invokeTool", {"chatId": chat, "toolId": "weather:clock", "args": {}})
    assert err.value.code == -32011 and err.value.data["missing"] == ["api_key"]
    assert (await app.request("chats/get", {"id": chat}))["messages"] == []  # nothing joined the branch

    await app.request("providers/set", {"id": "model", "kind": "scripted", "config": {"script": [
        {"text": "checking", "toolCalls": [{"tool": "weather_forecast", "args": {"city": "Rabat"}}]},
        {"text": "I need a key"}]}})
    turn = await app.request("chat/send", {"chatId": chat, "content": "weather?", "provider": "model"})
    assert turn["stopReason"] == "endTurn"
    finished = [n["params"]["event"]["toolCall"] for n in app.notifications
                if n["method"] == "chat/event" and n["params"]["event"]["kind"] == "toolCallFinished"]
    assert [(c["status"], c["errorKind"]) for c in finished] == [("error", "unconfigured")]
    assert "api_key, units have no value" in finished[0]["error"]  # what the model is told


async def test_bad_config_requests_name_what_to_fix(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})

    async def error(method: str, params: dict[str, Any]) -> RemoteError:
        with pytest.raises(RemoteError) as err:
            await app.request(method, params)
        return err.value

    unknown = await error("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"colour": "x"}})
    assert unknown.code == -32602 and unknown.data["path"] == "params.values.colour"
    assert "its fields: units, days" in unknown.data["reason"]
    shared = await error("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"endpoint": "x"}})
    assert "toolset-level field: set it without toolId" in shared.data["reason"]
    typed = await error("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"days": "5"}})
    assert (typed.data["path"], typed.data["reason"]) == ("params.values.days", "expected an integer, got a string")
    flag = await error("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"days": True}})
    assert flag.data["reason"] == "expected an integer, got a boolean"
    empty = await error("config/set", {"toolsetId": "weather", "values": {"api_key": "  \n"}})
    assert empty.data["reason"].startswith("an empty secret")
    deleting = await error("config/delete", {"toolsetId": "weather", "key": "nope"})
    assert deleting.code == -32602 and deleting.data["path"] == "params.key"

    assert (await error("config/get", {"toolsetId": "nowhere"})).data == {"kind": "toolset", "id": "nowhere"}
    missing_tool = await error("config/get", {"toolsetId": "weather", "toolId": "radar"})
    assert missing_tool.code == -32010 and missing_tool.data == {"kind": "tool", "id": "weather:radar"}
    assert (await error("config/test", {"toolsetId": "weather", "toolId": "write_file"})).code == -32010

    await app.request("toolsets/setEnabled", {"id": "weather", "enabled": False})
    frozen = await error("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"units": "metric"}})
    assert frozen.code == -32011 and frozen.data == {"reason": "toolset disabled"}
    assert "enable it first" in frozen.message
    assert (await error("config/delete", {"toolsetId": "weather", "key": "endpoint"})).code == -32011
    # Reading is fine while disabled; the tools cannot run, so they are unavailable.
    assert (await app.request("config/get", {"toolsetId": "weather"}))["status"] == "unavailable"
    assert (await statuses(app))["weather:forecast"] == "unavailable"


async def test_export_writes_the_schema_and_no_value(app: SidecarClient, tmp_path: Path):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await configured(app)
    await app.request("config/set", {"toolsetId": "weather", "values": {"endpoint": "https://eu.example.com"}})
    target = tmp_path / "weather.zip"
    await app.request("toolsets/export", {"id": "weather", "path": str(target)})
    with zipfile.ZipFile(target) as z:
        manifest = z.read("toolset.yaml").decode()
        everything = b"".join(z.read(n) for n in z.namelist())
    import yaml

    data = yaml.safe_load(manifest)
    assert data["config_schema"]["api_key"] == {"description": "Your API key", "type": "string", "secret": True,
                                                "required": True}
    assert data["config_schema"]["endpoint"]["default"] == "https://api.example.com"
    forecast = next(t for t in data["tools"] if t["id"] == "forecast")
    assert forecast["config_schema"]["days"] == {"description": "How many days ahead", "type": "integer",
                                                 "secret": False, "required": False, "default": 3}
    assert KEY.encode() not in everything and b"eu.example.com" not in everything and UNITS.encode() not in everything

    # What was exported installs again, as a fresh toolset with nothing configured.
    await app.request("toolsets/uninstall", {"id": "weather"})
    await app.request("toolsets/import", {"path": str(target)})
    assert (await statuses(app))["weather:forecast"] == "available"


async def test_an_upgrade_keeps_the_values_the_schema_still_has(app: SidecarClient, tmp_path: Path):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await configured(app)
    await app.request("config/set", {"toolsetId": "weather", "values": {"endpoint": "https://eu.example.com"}})
    await app.request("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"days": 7}})

    # 1.1: days becomes a string (7 -> "7"), units becomes an integer ("metric" cannot be one),
    # and endpoint leaves the schema.
    newer = weather_copy(tmp_path, "weather-1.1", (
        '  endpoint: {description: "API endpoint URL", default: "https://api.example.com"}\n', ""))
    text = (newer / "toolset.yaml").read_text()
    text = text.replace('days: {description: "How many days ahead", type: integer, default: 3}',
                        'days: {description: "How many days ahead", default: "3"}')
    text = text.replace('units: {description: "metric or imperial", required: true}',
                        'units: {description: "unit system number", type: integer, required: true}')
    (newer / "toolset.yaml").write_text(text.replace('version: "1.0.0"', 'version: "1.1.0"'))
    await app.request("toolsets/import", {"path": str(newer), "replace": True})

    shared = {f["key"]: f for f in (await app.request("config/get", {"toolsetId": "weather"}))["fields"]}
    assert list(shared) == ["api_key"] and shared["api_key"]["isSet"] is True  # the secret stayed
    own = {f["key"]: f for f in (await app.request("config/get", {"toolsetId": "weather",
                                                                  "toolId": "forecast"}))["fields"]}
    assert own["days"]["value"] == "7"
    assert own["units"].get("isSet") is None  # dropped: it could not become an integer
    assert (await statuses(app))["weather:forecast"] == "available"
    assert (await statuses(app))["weather:clock"] == "connected"


async def test_uninstall_removes_the_values_and_a_reinstall_starts_unconfigured(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await configured(app)
    await app.request("toolsets/uninstall", {"id": "weather"})
    await app.request("toolsets/import", {"path": str(WEATHER)})
    got = await app.request("config/get", {"toolsetId": "weather"})
    assert got["status"] == "available" and not any(f.get("isSet") for f in got["fields"])


def files_holding(folder: Path, value: str) -> list[Path]:
    return [p for p in sorted(folder.rglob("*")) if p.is_file() and value.encode() in p.read_bytes()]


def stored_secrets(data_dir: Path) -> dict[str, str]:
    """What the secret store's file backend holds (its 0600 file)."""
    return json.loads((data_dir / "secrets.json").read_text())["secrets"]


async def test_a_secret_value_lives_in_the_secret_store_only(app: SidecarClient, data_dir: Path):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await configured(app)
    assert stored_secrets(data_dir) == {"config:weather:*:api_key": KEY}
    assert files_holding(data_dir, KEY) == [data_dir / "secrets.json"]  # not the database, nor its WAL

    # The mask config/get shows, sent back, keeps the stored value; a pasted newline is dropped.
    await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": "****"}})
    assert stored_secrets(data_dir)["config:weather:*:api_key"] == KEY
    await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": KEY + "-2\n"}})
    assert stored_secrets(data_dir)["config:weather:*:api_key"] == KEY + "-2"

    assert await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": None}}) == \
        {"status": "available"}
    assert stored_secrets(data_dir) == {}
    await configured(app)
    await app.request("toolsets/uninstall", {"id": "weather"})
    assert stored_secrets(data_dir) == {}  # its secrets left with it


async def test_inspect_shows_the_fields_a_toolset_will_ask_for(app: SidecarClient):
    seen = await app.request("toolsets/inspect", {"path": str(WEATHER)})
    assert [(f["key"], f["secret"], f["required"]) for f in seen["configSchema"]] == [
        ("api_key", True, True), ("endpoint", False, False)]
    forecast = next(t for t in seen["tools"] if t["id"] == "weather:forecast")
    assert [(f["key"], f["type"], f.get("default")) for f in forecast["configSchema"]] == [
        ("units", "string", None), ("days", "integer", 3)]
