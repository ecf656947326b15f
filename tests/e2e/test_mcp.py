"""MCP servers through the real sidecar: added, connected, listed, called, supervised, removed."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.npm import npm_bin
from tests.procs import wait_gone
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"
EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"


async def add(sc: SidecarClient, server_id: str, script: str = "basic.py", **extra: object) -> dict:
    params = {"id": server_id, "command": sys.executable, "args": [str(FIXTURES / script)]} | extra
    return (await sc.request("mcpServers/add", params))["server"]


async def status(sc: SidecarClient, key: str, *wanted: str, timeout: float = 30) -> dict:
    async def current() -> dict:
        return next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == key)

    with anyio.move_on_after(scaled(timeout)):
        while (server := await current())["status"] not in wanted:
            await anyio.sleep(0.05)
        return server
    pytest.fail(f"{key} never became {wanted}: {await current()}")


async def call(sc: SidecarClient, tool: str, args: dict, **extra: object) -> dict:
    return (await sc.request("tools/call", {"toolId": tool, "args": args} | extra, timeout=60))["toolCall"]


async def test_added_server_connects_and_its_tools_are_first_class(sidecar: SidecarClient):
    server = await add(sidecar, "basic")
    assert server["id"] == "basic~basic" and server["userMcp"] is True
    connected = await status(sidecar, "basic~basic", "connected", "error")
    assert connected["status"] == "connected", connected["error"]
    assert connected["toolCount"] >= 5
    note = await sidecar.wait_notification("mcpServers/status", lambda p: p["server"]["status"] == "connected")
    assert note["params"]["server"]["id"] == "basic~basic"

    tools = {t["id"]: t for t in (await sidecar.request("tools/list"))["tools"]}
    echo = tools["mcp:basic~basic:echo"]
    assert echo["provider"] == "mcp" and echo["toolsetId"] == "basic" and echo["inputSchema"]["type"] == "object"
    assert "write_file" in tools  # beside the built-ins

    chat_id = (await sidecar.request("chats/create", {"title": "mcp"}))["chat"]["id"]
    done = await call(sidecar, "mcp:basic~basic:echo", {"text": "hi"}, chatId=chat_id)
    assert done["status"] == "success" and done["result"]["content"][0]["text"] == "hi"
    legacy = await call(sidecar, "mcp:basic:add", {"a": 2, "b": 3})  # unambiguous legacy id
    assert legacy["toolId"] == "mcp:basic~basic:add" and "5" in legacy["result"]["content"][0]["text"]
    image = await call(sidecar, "mcp:basic~basic:image", {})
    assert image["result"]["content"][0]["type"] == "image"
    resource = await call(sidecar, "mcp:basic~basic:resource", {})
    assert resource["result"]["content"][0]["type"] == "resource"

    bad = await sidecar.request_raw("tools/call", {"toolId": "mcp:basic~basic:add", "args": {"a": "x", "b": 1}})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["path"] == "params.args.a"
    failed = await call(sidecar, "mcp:basic~basic:fail", {})
    assert failed["status"] == "error" and failed["errorKind"] == "server"

    renamed = await sidecar.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo",
                                                          "nameOverride": "Parrot", "renderer": "document",
                                                          "rendererConfig": {"content": "$return.content"}})
    assert renamed["tool"]["name"] == "Parrot"
    again = await call(sidecar, "mcp:basic~basic:echo", {"text": "yo"})
    assert again["renderPlan"]["renderer"] == "document"
    await sidecar.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo", "enabled": False})
    off = await sidecar.request_raw("tools/call", {"toolId": "mcp:basic~basic:echo", "args": {"text": "no"}})
    assert off["error"]["code"] == -32011 and "disabled" in off["error"]["message"]
    await sidecar.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo", "enabled": True})
    await sidecar.request("mcpServers/setEnabled", {"id": "basic~basic", "enabled": False})
    off = await sidecar.request_raw("tools/call", {"toolId": "mcp:basic~basic:add", "args": {"a": 1, "b": 1}})
    assert off["error"]["code"] in (-32010, -32011)  # the server is off: its tools are gone or disabled
    off = await sidecar.request_raw("mcpServers/resources", {"id": "basic~basic"})
    assert off["error"]["code"] == -32011 and "disabled" in off["error"]["message"], off
    assert off["error"]["data"]["server"] == "basic~basic"
    await sidecar.request("mcpServers/setEnabled", {"id": "basic~basic", "enabled": True})
    await status(sidecar, "basic~basic", "connected", "error")
    assert (await call(sidecar, "mcp:basic~basic:echo", {"text": "back"}))["result"]["content"][0]["text"] == "back"

    resources = await sidecar.request("mcpServers/resources", {"id": "basic~basic"})
    assert resources["resources"][0]["uri"] == "fixture://greeting"
    read = await sidecar.request("mcpServers/readResource", {"id": "basic", "uri": "fixture://greeting"})
    assert read["contents"][0]["text"]
    prompts = await sidecar.request("mcpServers/prompts", {"id": "basic~basic"})
    assert prompts["prompts"][0]["name"] == "review"
    prompt = await sidecar.request("mcpServers/getPrompt", {"id": "basic~basic", "name": "review",
                                                            "arguments": {"code": "x = 1"}})
    assert "x = 1" in json.dumps(prompt["messages"])


async def test_progress_cancellation_and_elicitation_cross_the_sidecar(sidecar: SidecarClient, tmp_path: Path):
    await add(sidecar, "basic")
    await status(sidecar, "basic~basic", "connected")
    await call(sidecar, "mcp:basic~basic:slow", {"seconds": 0.3}, workDoneToken="t1")
    reports = [n for n in sidecar.notifications if n["method"] == "$/progress" and n["params"]["token"] == "t1"]
    assert reports and reports[-1]["params"]["value"]["percentage"] == 100

    marker = tmp_path / "cancelled"
    answer = sidecar.expect("long")
    await sidecar.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                        "params": {"toolId": "mcp:basic~basic:slow", "args": {"seconds": 30, "marker": str(marker)},
                                   "workDoneToken": "t2"}})
    # The tool runs (its first progress report arrived) before it is cancelled: a fixed sleep here
    # raced the server's start on a loaded machine, and a call cancelled before it reached the server
    # leaves no marker.
    await sidecar.wait_notification("$/progress", lambda p: p.get("token") == "t2")
    await sidecar.notify("$/cancelRequest", {"id": "long"})
    assert (await answer(10))["error"]["code"] == -32800
    with anyio.fail_after(scaled(10)):
        while not marker.exists():  # the server was told and stopped the tool
            await anyio.sleep(0.05)

    sidecar.handle("ui/elicit", lambda p: {"action": "accept", "content": {"name": "Ada", "age": 36}})
    asked = await call(sidecar, "mcp:basic~basic:ask", {})
    assert asked["result"]["content"][0]["text"] == "hello Ada (36)"


async def test_elicitations_say_their_mode_and_source_and_a_misfit_answer_fails_the_call(sidecar: SidecarClient):
    await add(sidecar, "basic")
    await status(sidecar, "basic~basic", "connected")
    chat_id = (await sidecar.request("chats/create", {"title": "asking"}))["chat"]["id"]
    asked: list[dict] = []

    def answer(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept"}

    sidecar.handle("ui/elicit", answer)
    done = await call(sidecar, "mcp:basic~basic:ask_url", {}, chatId=chat_id)
    assert done["status"] == "success" and done["result"]["content"][0]["text"] == "url answer: accept"
    assert asked[-1]["mode"] == "url" and asked[-1]["url"] == "https://example.com/login?state=abc"
    assert asked[-1]["elicitationId"] == "login-1" and asked[-1]["server"] == "basic~basic"
    assert asked[-1]["chatId"] == chat_id and asked[-1]["toolCallId"] == done["id"]
    assert "requestedSchema" not in asked[-1]

    sidecar.handle("ui/elicit", lambda p: asked.append(p) or {"action": "accept", "content": {"name": "Ada"}})
    done = await call(sidecar, "mcp:basic~basic:ask", {}, chatId=chat_id)
    assert done["status"] == "success"
    assert asked[-1]["mode"] == "form" and asked[-1]["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert asked[-1]["chatId"] == chat_id and asked[-1]["toolCallId"] == done["id"]

    sidecar.handle("ui/elicit", lambda p: {"action": "accept", "content": {"name": 42}})
    misfit = await call(sidecar, "mcp:basic~basic:ask", {}, chatId=chat_id)
    assert misfit["status"] == "error" and misfit["errorKind"] == "elicitation"
    assert "content.name" in misfit["error"] and "cancelled" in misfit["error"]
    sidecar.handle("ui/elicit", lambda p: {"action": "maybe"})
    malformed = await call(sidecar, "mcp:basic~basic:ask", {}, chatId=chat_id)
    assert malformed["status"] == "error" and malformed["errorKind"] == "elicitation"


async def test_faults_stay_on_their_server(sidecar: SidecarClient):
    await add(sidecar, "exits", "exits.py")
    await add(sidecar, "nothing", type="streamable-http", url="http://127.0.0.1:9/mcp", command=None, args=[])
    await add(sidecar, "needs-var", env={"TOKEN": "${COVALT_TEST_SURELY_UNSET}"})
    await add(sidecar, "basic")
    exited = await status(sidecar, "exits~exits", "error")
    assert "the database file is missing" in exited["error"]
    assert (await status(sidecar, "nothing~nothing", "error"))["error"]
    missing = await status(sidecar, "needs-var~needs-var", "error")
    assert "COVALT_TEST_SURELY_UNSET" in missing["error"]
    await status(sidecar, "basic~basic", "connected")
    assert await sidecar.request("ping") == {}

    crashed = await call(sidecar, "mcp:basic~basic:crash", {})
    assert crashed["status"] == "error"
    await status(sidecar, "basic~basic", "connected")  # reconnected by itself
    back = await call(sidecar, "mcp:basic~basic:echo", {"text": "back"})
    assert back["status"] == "success", back["error"]


async def test_disable_remove_and_uninstall_stop_the_server_processes(sidecar: SidecarClient, tmp_path: Path):
    await add(sidecar, "basic")
    await status(sidecar, "basic~basic", "connected")
    pid = int((await call(sidecar, "mcp:basic~basic:pid", {}))["result"]["content"][0]["text"])

    off = (await sidecar.request("mcpServers/setEnabled", {"id": "basic~basic", "enabled": False}))["server"]
    assert off["enabled"] is False
    await status(sidecar, "basic~basic", "disabled")
    assert await wait_gone(pid, 10)
    ids = [t["id"] for t in (await sidecar.request("tools/list"))["tools"]]
    assert not any(i.startswith("mcp:basic~basic:") for i in ids)
    await sidecar.request("mcpServers/setEnabled", {"id": "basic~basic", "enabled": True})
    await status(sidecar, "basic~basic", "connected")
    pid = int((await call(sidecar, "mcp:basic~basic:pid", {}))["result"]["content"][0]["text"])
    await sidecar.request("mcpServers/remove", {"id": "basic~basic"})
    assert await wait_gone(pid, 10)
    assert (await sidecar.request("mcpServers/list"))["servers"] == []

    folder = tmp_path / "with-server"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write(f"\nmcp_servers:\n  - id: helper\n    command: {sys.executable}\n"
                f"    args: [\"{FIXTURES / 'basic.py'}\"]\n")
    await sidecar.request("toolsets/import", {"path": str(folder)})
    await status(sidecar, "app-builder~helper", "connected")  # auto-enabled on install
    declared = await sidecar.request_raw("mcpServers/remove", {"id": "app-builder~helper"})
    assert declared["error"]["code"] == -32011
    pid = int((await call(sidecar, "mcp:app-builder~helper:pid", {}))["result"]["content"][0]["text"])
    await sidecar.request("toolsets/uninstall", {"id": "app-builder"})
    assert await wait_gone(pid, 10)


async def test_shutdown_leaves_no_server_behind(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as sc:
        await add(sc, "basic")
        await status(sc, "basic~basic", "connected")
        pid = int((await call(sc, "mcp:basic~basic:pid", {}))["result"]["content"][0]["text"])
    assert await wait_gone(pid, 10)


async def test_servers_from_other_apps_are_previewed_then_imported(sidecar: SidecarClient, tmp_path: Path):
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {
        "everything": {"command": npm_bin("mcp-server-everything"), "args": ["stdio"],
                       "env": {"API_KEY": "sk-live-abcdef"}},
        "files": {"command": npm_bin("mcp-server-filesystem"), "args": [str(tmp_path)]},
    }}))
    preview = await sidecar.request("mcpServers/importPreview", {"path": str(config)})
    assert {s["id"] for s in preview["servers"]} == {"everything", "files"}
    assert "sk-live-abcdef" not in json.dumps(preview)
    assert (await sidecar.request("mcpServers/list"))["servers"] == []  # a preview adds nothing
    added = await sidecar.request("mcpServers/import", {"path": str(config), "ids": ["everything", "files"]})
    assert {s["id"] for s in added["servers"]} == {"everything~everything", "files~files"}
    await status(sidecar, "everything~everything", "connected")
    await status(sidecar, "files~files", "connected")
    echoed = await call(sidecar, "mcp:everything~everything:echo", {"message": "moved over"})
    assert "moved over" in echoed["result"]["content"][0]["text"]
    (tmp_path / "note.txt").write_text("from the filesystem server")
    read = await call(sidecar, "mcp:files~files:read_text_file", {"path": str(tmp_path / "note.txt")})
    assert "from the filesystem server" in json.dumps(read["result"])
    bad = await sidecar.request_raw("mcpServers/import", {"path": str(config), "ids": ["nope"]})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["path"] == "params.ids[0]"


async def test_a_server_request_past_its_limit_is_a_timeout(sidecar: SidecarClient):
    await add(sidecar, "slowpoke", callTimeout=0.5)
    await status(sidecar, "slowpoke~slowpoke", "connected")
    late = await sidecar.request_raw("mcpServers/readResource", {"id": "slowpoke", "uri": "fixture://slow/5"})
    assert late["error"]["code"] == -32022, late
    assert late["error"]["data"]["server"] == "slowpoke~slowpoke"
    assert late["error"]["data"]["source"] == "mcp" and "within 0.5 s" in late["error"]["data"]["message"]
    read = await sidecar.request("mcpServers/readResource", {"id": "slowpoke", "uri": "fixture://slow/0"})
    assert read["contents"][0]["text"] == "slow, but here"  # the server keeps serving
