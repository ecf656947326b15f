"""Soft delete and restore, writes refused inside a disabled or deleted toolset, and tools whose
provider went away kept with their overrides (seed 002), through the app's wire."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests.http_server import HttpServer
from tests.toolsets.url_bundles import bundle, serve_bundle

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets"
EXAMPLE = FIXTURES / "app-builder"
WEATHER = FIXTURES / "weather"


async def _ids(app: SidecarClient, method: str, key: str, **params: object) -> set[str]:
    return {t["id"] for t in (await app.request(method, params))[key]}


async def test_a_deleted_toolset_is_hidden_refuses_changes_and_comes_back_as_it_was(app: SidecarClient,
                                                                                     tmp_path: Path):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await app.request("tools/setOverride", {"toolsetId": "weather", "toolId": "clock", "nameOverride": "Time"})
    await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": "k-123", "endpoint": "https://x.example"}})
    chat = (await app.request("chats/create", {"title": "t"}))["chat"]["id"]
    assert "weather:clock" in await _ids(app, "tools/list", "tools", chatId=chat)

    deleted = (await app.request("toolsets/delete", {"id": "weather"}))["toolset"]
    assert deleted["softDeletedAt"].endswith("Z")
    assert "weather" not in await _ids(app, "toolsets/list", "toolsets")
    assert "weather" in await _ids(app, "toolsets/list", "toolsets", includeDeleted=True)
    listed = await _ids(app, "tools/list", "tools", includeDisabled=True)
    assert not any(t.startswith("weather:") for t in listed)
    assert not any(t.startswith("weather:") for t in await _ids(app, "tools/list", "tools", chatId=chat))
    detail = await app.request("toolsets/get", {"id": "weather"})  # still answers: the UI offers restore
    assert detail["toolset"]["softDeletedAt"] == deleted["softDeletedAt"]
    assert {t["status"] for t in detail["tools"]} == {"unavailable"}
    assert all("toolsets/restore" in t["unavailableReason"] for t in detail["tools"])

    called = await app.request_raw("tools/call", {"toolId": "weather:clock"})
    assert called["error"]["code"] == -32010 and "toolsets/restore" in called["error"]["message"]
    for method, params in [
        ("tools/setOverride", {"toolsetId": "weather", "toolId": "clock", "nameOverride": "x"}),
        ("config/set", {"toolsetId": "weather", "values": {"endpoint": "https://y.example"}}),
        ("config/get", {"toolsetId": "weather"}),
        ("toolsets/setEnabled", {"id": "weather", "enabled": False}),
        ("toolsets/export", {"id": "weather", "path": str(tmp_path / "w.zip")}),
        ("toolsets/import", {"path": str(WEATHER), "replace": True}),
        ("toolsets/delete", {"id": "weather"}),
    ]:
        refused = await app.request_raw(method, params)
        assert refused["error"]["code"] == -32011, (method, refused)
        assert "toolsets/restore" in refused["error"]["message"], (method, refused)

    restored = (await app.request("toolsets/restore", {"id": "weather"}))["toolset"]
    assert "softDeletedAt" not in restored and restored["enabled"] is True
    tool = (await app.request("tools/get", {"id": "weather:clock"}))["tool"]
    assert tool["name"] == "Time" and tool["status"] != "unavailable"  # the override is intact
    fields = {f["key"]: f for f in (await app.request("config/get", {"toolsetId": "weather"}))["fields"]}
    assert fields["endpoint"]["value"] == "https://x.example" and fields["api_key"]["value"] == "****"
    assert "weather:clock" in await _ids(app, "tools/list", "tools", chatId=chat)
    again = await app.request_raw("toolsets/restore", {"id": "weather"})
    assert again["error"]["code"] == -32011 and "not deleted" in again["error"]["message"]


async def test_uninstall_removes_a_deleted_toolset_at_once(app: SidecarClient, data_dir: Path):
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    await app.request("toolsets/delete", {"id": "app-builder"})
    await app.request("toolsets/uninstall", {"id": "app-builder"})
    assert await _ids(app, "toolsets/list", "toolsets", includeDeleted=True) == set()
    assert not (data_dir / "toolsets" / "app-builder").exists()


async def test_a_disabled_toolset_refuses_config_and_schedules_saying_to_enable_it(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await app.request("toolsets/setEnabled", {"id": "weather", "enabled": False})
    for method, params in [
        ("config/set", {"toolsetId": "weather", "values": {"endpoint": "https://y.example"}}),
        ("config/delete", {"toolsetId": "weather", "key": "endpoint"}),
        ("tools/setOverride", {"toolsetId": "weather", "toolId": "clock", "enabled": False}),
    ]:
        refused = await app.request_raw(method, params)
        assert refused["error"]["code"] == -32011 and "toolsets/setEnabled" in refused["error"]["message"], method


async def test_a_schedule_of_a_disabled_toolsets_tool_is_refused(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    await app.request("config/set", {"toolsetId": "weather", "values": {"api_key": "k"}})
    await app.request("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"units": "metric"}})
    await app.request("toolsets/setEnabled", {"id": "weather", "enabled": False})
    refused = await app.request_raw("schedules/create", {"toolId": "weather:clock", "cron": "0 9 * * *"})
    assert refused["error"]["code"] == -32011 and "toolsets/setEnabled" in refused["error"]["message"]


async def test_a_deleted_toolsets_schedules_pause_and_resume_on_restore(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    made = (await app.request("schedules/create", {"toolId": "weather:clock", "cron": "0 9 * * *"}))["schedule"]
    await app.request("toolsets/delete", {"id": "weather"})
    paused = next(s for s in (await app.request("schedules/list"))["schedules"] if s["id"] == made["id"])
    assert "toolsets/restore" in paused["pausedReason"]
    await app.request("toolsets/restore", {"id": "weather"})
    resumed = next(s for s in (await app.request("schedules/list"))["schedules"] if s["id"] == made["id"])
    assert resumed.get("pausedReason") is None and resumed["nextRunAt"]


async def test_a_python_tool_whose_code_vanished_on_upgrade_is_kept_unavailable(app: SidecarClient, tmp_path: Path):
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    await app.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "run_command",
                                            "descriptionOverride": "mine"})
    newer = tmp_path / "newer"
    shutil.copytree(EXAMPLE, newer)
    (newer / "tools" / "shell.py").unlink()  # run_command's module is gone; the manifest still names it
    fresh = await app.request_raw("toolsets/inspect", {"path": str(newer)})
    assert fresh["error"]["code"] == -32013  # a bundle read on its own is still refused
    await app.request("toolsets/import", {"path": str(newer), "replace": True})

    tool = (await app.request("tools/get", {"id": "app-builder:run_command"}))["tool"]
    assert tool["status"] == "unavailable" and "tools/shell.py" in tool["unavailableReason"]
    assert tool["description"] == "mine"  # the user's override is kept
    assert "app-builder:run_command" not in await _ids(app, "tools/list", "tools")
    assert "app-builder:run_command" in await _ids(app, "tools/list", "tools", includeDisabled=True)
    called = await app.request_raw("tools/call", {"toolId": "app-builder:run_command", "args": {"command": "ls"}})
    assert called["error"]["code"] == -32011 and "tools/shell.py" in called["error"]["message"]

    await app.request("toolsets/import", {"path": str(EXAMPLE), "replace": True})  # the code is back
    tool = (await app.request("tools/get", {"id": "app-builder:run_command"}))["tool"]
    assert "unavailableReason" not in tool and tool["enabled"] is True and tool["description"] == "mine"


async def test_a_first_install_of_a_bundle_missing_a_module_is_still_refused(app: SidecarClient, tmp_path: Path):
    broken = tmp_path / "broken"
    shutil.copytree(EXAMPLE, broken)
    (broken / "tools" / "shell.py").unlink()
    refused = await app.request_raw("toolsets/import", {"path": str(broken), "replace": True})
    assert refused["error"]["code"] == -32013 and "tools/shell.py" in refused["error"]["message"]
    assert await _ids(app, "toolsets/list", "toolsets", includeDeleted=True) == set()


async def test_a_tool_left_out_of_an_upgrade_stays_when_the_user_has_something_of_it(app: SidecarClient,
                                                                                    tmp_path: Path):
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    await app.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file", "nameOverride": "R"})
    newer = tmp_path / "newer"
    shutil.copytree(EXAMPLE, newer)
    text = (newer / "toolset.yaml").read_text()
    start = text.index("  - id: read_file")
    end = text.index("  - id: run_command")
    (newer / "toolset.yaml").write_text(text[:start] + text[end:])  # read_file left out of the manifest
    await app.request("toolsets/import", {"path": str(newer), "replace": True})
    kept = (await app.request("tools/get", {"id": "app-builder:read_file"}))["tool"]
    assert kept["status"] == "unavailable" and "no longer in the toolset" in kept["unavailableReason"]
    assert kept["name"] == "R"
    exported = await app.request("toolsets/export", {"id": "app-builder", "path": str(tmp_path / "e.zip")})
    assert exported["size"] > 0


async def test_a_built_in_that_left_the_build_is_kept_unavailable(data_dir: Path):
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as app:
        await app.request("ping")
    with sqlite3.connect(data_dir / "sidecar.db") as db:  # a built-in an earlier version had
        db.execute("INSERT INTO tools (tool_id, provider, name, description, input_schema, enabled) "
                   "VALUES ('old_tool', 'builtin', 'Old tool', 'from an older build', '{}', 0)")
    for _ in range(2):  # kept at every start, never deleted
        async with SidecarClient.in_process(data_dir, secrets_backend="file") as app:
            tool = (await app.request("tools/get", {"id": "old_tool"}))["tool"]
            assert tool["status"] == "unavailable" and "not part of this version" in tool["unavailableReason"]
            called = await app.request_raw("tools/call", {"toolId": "old_tool"})
            assert called["error"]["code"] == -32011 and "not part of this version" in called["error"]["message"]
            assert "old_tool" not in await _ids(app, "tools/list", "tools")
    with sqlite3.connect(data_dir / "sidecar.db") as db:
        assert db.execute("SELECT enabled FROM tools WHERE tool_id = 'old_tool'").fetchone() == (0,)


async def test_a_deleted_toolset_cannot_be_attached_to_a_chat(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    await app.request("toolsets/delete", {"id": "app-builder"})
    chat = (await app.request("chats/create", {"title": "t"}))["chat"]["id"]
    refused = await app.request_raw("chat/send", {"chatId": chat, "content": "x",
                                                  "attachments": [{"kind": "toolset", "id": "app-builder"}]})
    assert refused["error"]["code"] == -32011 and "toolsets/restore" in refused["error"]["message"]


async def test_running_a_deleted_toolsets_schedule_keeps_it_resumable(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(WEATHER)})
    made = (await app.request("schedules/create", {"toolId": "weather:clock", "cron": "0 9 * * *"}))["schedule"]
    await app.request("toolsets/delete", {"id": "weather"})
    ran = await app.request_raw("schedules/runNow", {"id": made["id"]})
    assert "toolsets/restore" in ran["error"]["message"]
    await app.request("toolsets/restore", {"id": "weather"})
    resumed = next(s for s in (await app.request("schedules/list"))["schedules"] if s["id"] == made["id"])
    assert resumed.get("pausedReason") is None


async def test_a_disabled_toolsets_server_cannot_be_changed(app: SidecarClient, tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write("\nmcp_servers:\n  - id: srv\n    command: /bin/true\n")
    await app.request("toolsets/import", {"path": str(folder)})
    await app.request("toolsets/setEnabled", {"id": "app-builder", "enabled": False})
    for method, params in [("mcpServers/setEnabled", {"id": "app-builder~srv", "enabled": False}),
                           ("mcpServers/update", {"id": "app-builder~srv", "enabled": False})]:
        refused = await app.request_raw(method, params)
        assert refused["error"]["code"] == -32011 and "toolsets/setEnabled" in refused["error"]["message"], method


async def test_a_deleted_url_toolset_is_neither_checked_for_updates_nor_upgraded(app: SidecarClient,
                                                                                 http_server: HttpServer):
    url = serve_bundle(http_server, "/inventory.zip", bundle("1.0.0"))
    await app.request("toolsets/import", {"url": url})
    await app.request("toolsets/delete", {"id": "inventory"})
    for method in ("toolsets/checkUpdate", "toolsets/upgrade"):
        refused = await app.request_raw(method, {"id": "inventory"})
        assert refused["error"]["code"] == -32011 and "toolsets/restore" in refused["error"]["message"], method
