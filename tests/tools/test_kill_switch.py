"""The kill switch (issue 16 item 1, seed 004 "Safety Guardrails"): settings/set toolsEnabled false
refuses every tool call at once, stops the ones running, and chat turns go on without tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.chat.turns import TOOLS_OFF
from sidecar.client import RemoteError, SidecarClient
from tests.e2e.test_chat import events, new_chat, scripted, send, tool_line
from tests.e2e.test_http_tools import EXAMPLE as HTTP_EXAMPLE
from tests.e2e.test_mcp import add, status
from tests.http_server import HttpServer, Response
from tests.timing import scaled

pytestmark = pytest.mark.anyio

SLEEP = {"command": "sleep 30"}


async def switch(sc: SidecarClient, on: bool) -> dict[str, Any]:
    return (await sc.request("settings/set", {"toolsEnabled": on}))["settings"]


async def refusal(sc: SidecarClient, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await sc.request(method, params)
    return info.value


def finished(sc: SidecarClient, message_id: str) -> list[dict[str, Any]]:
    return [e["event"]["toolCall"] for e in events(sc, message_id) if e["event"]["kind"] == "toolCallFinished"]


async def running(sc: SidecarClient, count: int) -> None:
    """Wait until ``count`` tools are running (what the switch would stop)."""
    async def check() -> bool:
        return (await sc.request("debug/info"))["toolsRunning"] == count

    with anyio.fail_after(scaled(10)):
        while not await check():
            await anyio.sleep(0.02)


# Every other setting at its default (settings/get shows them all).
DEFAULTS = {"toolSelection": "auto", "toolBudgetTokens": None, "toolBudgetCount": 40, "relevantTools": 8,
            "pinnedTools": [], "keepBuiltins": True}


def tools_on(on: bool) -> dict[str, Any]:
    return {"toolsEnabled": on, **DEFAULTS}


async def test_settings_start_with_tools_on_and_change_only_what_is_given(app: SidecarClient):
    assert await app.request("settings/get") == {"settings": tools_on(True)}
    assert (await app.request("debug/info"))["toolsEnabled"] is True
    assert await app.request("settings/set", {}) == {"settings": tools_on(True)}
    assert not [n for n in app.notifications if n["method"] == "settings/changed"]  # nothing changed

    assert await switch(app, False) == tools_on(False)
    note = await app.wait_notification("settings/changed")
    assert note["params"] == {"settings": tools_on(False), "changed": ["toolsEnabled"]}
    assert await app.request("settings/set", {}) == {"settings": tools_on(False)}  # unchanged
    assert (await app.request("debug/info"))["toolsEnabled"] is False

    for bad in ({"toolsEnabled": "no"}, {"toolsEnabled": None}, {"tools_enabled": False}):
        err = await refusal(app, "settings/set", bad)
        assert err.code == -32602, bad
    assert (await app.request("settings/get"))["settings"]["toolsEnabled"] is False


async def test_off_refuses_every_call_at_once_and_on_lets_them_run_again(app: SidecarClient):
    chat_id = await new_chat(app)
    await switch(app, False)
    args = {"path": "a.txt", "content": "x"}
    for method, params in (("tools/call", {"toolId": "write_file", "args": args, "chatId": chat_id}),
                           ("tools/call", {"toolId": "no_such_tool", "args": {}}),
                           ("chat/invokeTool", {"chatId": chat_id, "toolId": "write_file", "args": args})):
        err = await refusal(app, method, params)
        assert err.code == -32012 and err.data == {"reason": "toolsOff"}, (method, err)
        assert "switched off" in err.message and "settings/set" in err.message
    # A turn in the chat offers no tools (the catalog still lists them), and an unknown chat is still unknown.
    assert (await app.request("tools/list", {"chatId": chat_id}))["tools"] == []
    assert (await app.request("tools/list"))["tools"]
    assert (await refusal(app, "tools/list", {"chatId": "nope"})).code == -32010
    # The palette's refusal left nothing in the chat, and nothing ran.
    assert (await app.request("chats/get", {"id": chat_id}))["messages"] == []
    assert (await app.request("workspace/files", {"chatId": chat_id}))["files"] == []

    await switch(app, True)
    assert (await app.request("tools/list", {"chatId": chat_id}))["tools"]
    ran = (await app.request("tools/call", {"toolId": "write_file", "args": args, "chatId": chat_id}))["toolCall"]
    assert ran["status"] == "success"


async def test_a_turn_while_off_is_offered_no_tools_and_the_model_is_told(app: SidecarClient):
    chat_id = await new_chat(app)
    await switch(app, False)
    pid = await scripted(app, "off",
                         {"text": "trying", "toolCalls": [{"tool": "write_file", "args": {"path": "a", "content": "b"}}]},
                         {"echoContext": True})
    turn = await send(app, chat_id, "write a file", provider=pid)
    assert turn["stopReason"] == "endTurn"
    [call] = finished(app, turn["messageId"])
    assert call["status"] == "error" and call["errorKind"] == "tools_off" and "switched off" in call["error"]
    got = await app.request("chats/get", {"id": chat_id})
    reply = next(m for m in got["messages"] if m["id"] == turn["messageId"])
    seen = json.loads(reply["content"][reply["content"].index("[{"):])
    assert seen[0] == {"role": "system", "content": TOOLS_OFF}
    assert "switched off" in seen[-1]["content"] and seen[-1]["role"] == "tool"
    assert (await app.request("workspace/files", {"chatId": chat_id}))["files"] == []

    await switch(app, True)  # on again: the next turn is offered tools and is not told otherwise
    pid = await scripted(app, "on", {"echoContext": True})
    turn = await send(app, chat_id, "hello", provider=pid)
    reply = next(m for m in (await app.request("chats/get", {"id": chat_id}))["messages"]
                 if m["id"] == turn["messageId"])
    seen = json.loads(reply["content"][reply["content"].index("[{"):])
    assert seen[0]["role"] == "user"  # no note (the earlier reply quotes the old one)


async def test_switching_off_stops_a_running_call_and_its_reply_says_why(app: SidecarClient):
    chat_id = await new_chat(app)
    answer = app.expect("slow")
    await app.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                    "params": {"toolId": "run_command", "args": SLEEP, "chatId": chat_id}})
    await running(app, 1)
    await switch(app, False)
    with anyio.fail_after(10):  # not the 30 s of the command
        reply = await answer(10)
    call = reply["result"]["toolCall"]
    assert call["status"] == "error" and call["errorKind"] == "killed"
    assert "switched tools off" in call["error"] and call["finishedAt"]
    assert (await app.request("debug/info"))["toolsRunning"] == 0
    await switch(app, True)
    again = (await app.request("tools/call", {"toolId": "write_file", "args": {"path": "a", "content": "b"},
                                              "chatId": chat_id}))["toolCall"]
    assert again["status"] == "success"  # the chat's lock was released


async def test_switching_off_mid_turn_stops_the_tool_and_the_turn_goes_on_without_tools(app: SidecarClient):
    chat_id = await new_chat(app)
    app.handle("ui/confirmToolCall", lambda p: {"decision": "allowOnce"})
    pid = await scripted(app, "mid",
                         {"text": "running", "toolCalls": [{"tool": "run_command", "args": SLEEP}]},
                         {"echoContext": True})
    turn_id = app.new_id()
    await app.send({"jsonrpc": "2.0", "id": turn_id, "method": "chat/send",
                    "params": {"chatId": chat_id, "content": "go", "provider": pid}})
    # Its question counts as running too (the switch withdraws it): wait for the tool itself.
    await app.wait_notification("chat/event", lambda p: p["event"]["kind"] == "toolCallStarted")
    await running(app, 1)
    await switch(app, False)
    with anyio.fail_after(scaled(10)):
        turn = (await app.expect(turn_id)(10))["result"]
    assert turn["stopReason"] == "endTurn"
    [call] = finished(app, turn["messageId"])
    assert call["errorKind"] == "killed"
    got = await app.request("chats/get", {"id": chat_id})
    reply = next(m for m in got["messages"] if m["id"] == turn["messageId"])
    assert reply["status"] == "complete" and [c["errorKind"] for c in reply["toolCalls"]] == ["killed"]
    seen = json.loads(reply["content"][reply["content"].index("[{"):])
    assert seen[0] == {"role": "system", "content": TOOLS_OFF}  # the model's next call was told


async def test_switching_off_withdraws_a_confirmation_question_and_the_turn_goes_on(app: SidecarClient):
    chat_id = await new_chat(app)
    turn_id = app.new_id()
    await app.send({"jsonrpc": "2.0", "id": turn_id, "method": "chat/send",
                    "params": {"chatId": chat_id, "content": tool_line("run_command", {"command": "echo hi > out.txt"})}})
    asked = await app.wait_for(lambda: next((r for r in app.server_requests if r["method"] == "ui/confirmToolCall"),
                                            None))
    await switch(app, False)  # the user never answers: the question is taken back
    withdrawn = await app.wait_notification("$/cancelRequest")
    assert withdrawn["params"] == {"id": asked["id"]}
    with anyio.fail_after(scaled(10)):
        answer = (await app.expect(turn_id)(10))["result"]
    assert answer["stopReason"] == "endTurn"
    [call] = finished(app, answer["messageId"])
    assert call["errorKind"] == "tools_off"
    assert (await app.request("workspace/files", {"chatId": chat_id}))["files"] == []


async def test_a_call_allowed_just_as_tools_go_off_is_refused(app: SidecarClient):
    chat_id = await new_chat(app)

    async def off_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        await switch(app, False)  # while the user is being asked
        return {"decision": "allowOnce"}

    app.handle("ui/confirmToolCall", off_then_allow)
    answer = await send(app, chat_id, tool_line("run_command", {"command": "echo hi > out.txt"}))
    [call] = finished(app, answer["messageId"])
    assert call["errorKind"] == "tools_off"
    assert (await app.request("workspace/files", {"chatId": chat_id}))["files"] == []


async def test_switching_off_stops_an_mcp_tool_at_its_server(app: SidecarClient, tmp_path: Path):
    await add(app, "basic")
    await status(app, "basic~basic", "connected")
    marker = tmp_path / "cancelled"
    answer = app.expect("long")
    await app.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                    "params": {"toolId": "mcp:basic~basic:slow", "args": {"seconds": 30, "marker": str(marker)}}})
    await running(app, 1)
    await switch(app, False)
    with anyio.fail_after(scaled(10)):
        call = (await answer(10))["result"]["toolCall"]
    assert call["status"] == "error" and call["errorKind"] == "killed"
    with anyio.fail_after(scaled(10)):
        while not marker.exists():  # the server was told and stopped the tool
            await anyio.sleep(0.05)


async def test_switching_off_stops_an_http_tool_waiting_on_its_server(app: SidecarClient, http_server: HttpServer):
    http_server.route("GET", "/items/slow", Response(json={"item": {"id": "slow", "name": "x", "price": 1}}, delay=30))
    await app.request("toolsets/import", {"path": str(HTTP_EXAMPLE)})
    await app.request("config/set", {"toolsetId": "http_example", "values": {"api_host": http_server.netloc}})
    await app.request("secrets/set", {"name": "EXAMPLE_API_KEY", "value": "ek-kill-switch-0001"})
    answer = app.expect("get")
    await app.send({"jsonrpc": "2.0", "id": "get", "method": "tools/call",
                    "params": {"toolId": "http_example:get_item", "args": {"id": "slow"}}})
    await running(app, 1)
    await switch(app, False)
    with anyio.fail_after(10):  # not the 30 s the server waits
        call = (await answer(10))["result"]["toolCall"]
    assert call["status"] == "error" and call["errorKind"] == "killed"
