"""schedules/* over the wire (the app in this loop): what a client sends and is told back."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import RemoteError, SidecarClient
from tests.schedules.support import MANIFEST, write_toolset

pytestmark = pytest.mark.anyio


async def refused(app: SidecarClient, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await app.request(method, params)
    return info.value


async def installed(app: SidecarClient, tmp_path: Path) -> None:
    await app.request("toolsets/import", {"path": str(write_toolset(tmp_path))})


@pytest.mark.parametrize(("cron", "says"), [
    ("30 2 31 2 *", "never fire"),
    ("* * * * * *", "at most once a minute"),
    ("not cron", "2 fields"),
    ("*/7", "does not divide an hour"),
])
async def test_bad_cron_is_invalid_params_naming_the_field(app: SidecarClient, tmp_path: Path, cron: str, says: str):
    await installed(app, tmp_path)
    error = await refused(app, "schedules/create", {"toolId": "clocked:hello", "cron": cron})
    assert error.code == -32602 and error.data["path"] == "params.cron" and says in error.data["reason"]


async def test_other_bad_input_says_what_to_fix(app: SidecarClient, tmp_path: Path):
    await installed(app, tmp_path)
    base = {"toolId": "clocked:hello", "cron": "*/5"}
    zone = await refused(app, "schedules/create", base | {"timezone": "Mars/Olympus"})
    assert zone.code == -32602 and zone.data["path"] == "params.timezone"
    args = await refused(app, "schedules/create", base | {"args": {"name": 3}})
    assert args.code == -32602 and args.data["path"] == "params.args.name"
    unknown = await refused(app, "schedules/create", base | {"toolId": "clocked:nope"})
    assert unknown.code == -32010 and unknown.data == {"kind": "tool", "id": "clocked:nope"}
    chat = await refused(app, "schedules/create", base | {"chatId": "gone"})
    assert chat.code == -32010 and chat.data["kind"] == "chat"
    files = await refused(app, "schedules/create", {"toolId": "list_files", "cron": "*/5"})
    assert files.code == -32602 and files.data["path"] == "params.chatId"
    asks = await refused(app, "schedules/create", {"toolId": "clocked:careful", "cron": "*/5"})
    assert asks.code == -32602 and asks.data["path"] == "params.allowUnattended"
    missing = await refused(app, "schedules/update", {"id": "nope", "enabled": False})
    assert missing.code == -32010 and missing.data == {"kind": "schedule", "id": "nope"}
    extra = await refused(app, "schedules/create", base | {"every": "minute"})
    assert extra.code == -32602


async def test_create_list_update_delete(app: SidecarClient, tmp_path: Path):
    await installed(app, tmp_path)
    chat = (await app.request("chats/create", {"title": "t"}))["chat"]["id"]
    made = (await app.request("schedules/create", {"toolId": "clocked:hello", "cron": "*/30", "chatId": chat,
                                                   "timezone": "Europe/Malta", "prompt": "Hi:"}))["schedule"]
    assert made["cron"] == "*/30 * * * *" and made["missed"] == "runOnce" and made["enabled"] is True
    assert made["explained"] and made["nextRunAt"].endswith("Z") and made["source"] == "user"
    listed = (await app.request("schedules/list", {"chatId": chat}))["schedules"]
    assert [s["id"] for s in listed] == [made["id"]]
    off = (await app.request("schedules/update", {"id": made["id"], "enabled": False, "prompt": None}))["schedule"]
    assert off["enabled"] is False and "nextRunAt" not in off and "prompt" not in off
    assert off["timezone"] == "Europe/Malta"  # what was not given stays
    await app.request("schedules/delete", {"id": made["id"]})
    assert (await app.request("schedules/list", {"chatId": chat}))["schedules"] == []
    gone = await refused(app, "schedules/delete", {"id": made["id"]})
    assert gone.code == -32010


async def test_inspect_shows_a_trigger_and_export_keeps_it(app: SidecarClient, tmp_path: Path):
    folder = write_toolset(tmp_path)
    seen = {t["id"]: t for t in (await app.request("toolsets/inspect", {"path": str(folder)}))["tools"]}
    assert seen["clocked:digest"]["schedule"] == "*/30 * * * *" and "schedule" not in seen["clocked:hello"]
    await app.request("toolsets/import", {"path": str(folder)})
    await app.request("toolsets/export", {"id": "clocked", "path": str(tmp_path / "out.zip")})
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        manifest = yaml.safe_load(z.read("toolset.yaml"))
    [digest] = [t for t in manifest["tools"] if t["id"] == "digest"]
    assert digest["trigger"] == {"type": "cron", "schedule": "*/30 * * * *", "prompt": "Summarise these reminders:"}


async def test_a_webhook_trigger_is_refused_at_import(app: SidecarClient, tmp_path: Path):
    folder = write_toolset(tmp_path, MANIFEST.replace("type: cron, schedule: \"*/30\"", "type: webhook"))
    error = await refused(app, "toolsets/import", {"path": str(folder)})
    assert error.code == -32013 and error.data["path"] == "toolset.yaml: tools[3].trigger.type"
    folder = write_toolset(tmp_path, MANIFEST.replace('"*/30"', '"30 2 31 2 *"'))
    error = await refused(app, "toolsets/import", {"path": str(folder)})
    assert error.code == -32013 and error.data["path"] == "toolset.yaml: tools[3].trigger.schedule"
    assert "never fire" in error.data["reason"]
