"""Any kind of tool can be put on a schedule: a built-in in a chat's workspace, an MCP server's
tool and an HTTP tool, each run through schedules/runNow as the scheduler runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KEY = "ek-sched-Zx4Cv7Bn0Mq2"


async def scheduled_run(app: SidecarClient, params: dict) -> dict:
    made = (await app.request("schedules/create", {"cron": "@daily"} | params))["schedule"]
    call = (await app.request("schedules/runNow", {"id": made["id"]}, timeout=60))["toolCall"]
    note = await app.wait_notification("schedules/fired", lambda p: p["scheduleId"] == made["id"])
    assert note["params"]["toolCall"]["id"] == call["id"]
    return call | {"message": note["params"]["message"]}


async def test_a_builtin_runs_in_its_chat_workspace(app: SidecarClient):
    chat = (await app.request("chats/create", {"title": "notes"}))["chat"]["id"]
    call = await scheduled_run(app, {"toolId": "write_file", "chatId": chat,
                                     "args": {"path": "daily.md", "content": "standup at 10"}})
    assert call["status"] == "success" and call["postManifestId"]
    read = await app.request("workspace/readFile", {"chatId": chat, "path": "daily.md"})
    assert read["text"] == "standup at 10"


async def test_an_mcp_tool_runs(app: SidecarClient):
    await app.request("mcpServers/add", {"id": "basic", "command": sys.executable,
                                         "args": [str(FIXTURES / "mcp" / "basic.py")]})
    await app.wait_notification("mcpServers/status", lambda p: p["server"]["status"] == "connected", timeout=30)
    call = await scheduled_run(app, {"toolId": "mcp:basic~basic:echo", "args": {"text": "tick"},
                                     "prompt": "The server said {{output}}."})
    assert call["status"] == "success" and call["message"] == "The server said tick."


async def test_an_http_tool_runs_with_its_config_and_secret_masked(app: SidecarClient, http_server: HttpServer):
    http_server.route("GET", "/items/a1/note", Response(body=f"restock soon ({KEY})",
                                                        headers={"Content-Type": "text/plain"}))
    await app.request("toolsets/import", {"path": str(FIXTURES / "toolsets" / "http_example")})
    await app.request("config/set", {"toolsetId": "http_example", "values": {"api_host": http_server.netloc}})
    await app.request("secrets/set", {"name": "EXAMPLE_API_KEY", "value": KEY})
    call = await scheduled_run(app, {"toolId": "http_example:item_note", "args": {"id": "a1"}})
    assert call["status"] == "success"
    assert http_server.requests_to("/items/a1/note")[0].query == [("api_key", KEY)]
    assert call["message"].startswith("restock soon") and KEY not in call["message"]
