"""Chat turns through the real process on the offline scripted provider."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import RemoteError, SidecarClient

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"


async def new_chat(sc: SidecarClient) -> str:
    return (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]


def events(sc: SidecarClient, message_id: str) -> list[dict[str, Any]]:
    found = [n["params"] for n in sc.notifications
             if n["method"] == "chat/event" and n["params"]["messageId"] == message_id]
    return found


def kinds(evs: list[dict[str, Any]]) -> list[str]:
    return [e["event"]["kind"] for e in evs]


def text_of(evs: list[dict[str, Any]]) -> str:
    return "".join(e["event"]["text"] for e in evs if e["event"]["kind"] == "textDelta")


async def send(sc: SidecarClient, chat_id: str, content: str, **extra: Any) -> dict[str, Any]:
    return await sc.request("chat/send", {"chatId": chat_id, "content": content, **extra})


async def scripted(sc: SidecarClient, provider_id: str, *script: dict[str, Any]) -> str:
    await sc.request("providers/set", {"id": provider_id, "kind": "scripted", "config": {"script": list(script)}})
    return provider_id


def tool_line(tool: str, args: dict[str, Any]) -> str:
    return f"/tool {tool} {json.dumps(args)}"


async def test_a_turn_streams_in_order_and_its_tools_write_the_workspace(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    echo = await send(sidecar, chat_id, "hello there, sidecar")
    assert echo["stopReason"] == "endTurn"
    evs = events(sidecar, echo["messageId"])
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
    assert kinds(evs)[0] == "messageStarted" and kinds(evs)[-1] == "messageCompleted"
    assert text_of(evs) == "hello there, sidecar"
    assert evs[0]["event"]["userMessageId"] == echo["userMessageId"]

    content = tool_line("write_file", {"path": "notes/a.txt", "content": "one"}) + "\n" + \
        tool_line("read_file", {"path": "notes/a.txt"})
    turn = await send(sidecar, chat_id, content)
    assert turn["stopReason"] == "endTurn"
    evs = events(sidecar, turn["messageId"])
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
    order = [k for k in kinds(evs) if k != "textDelta"]
    # Each model call is told its tools first (toolsOffered): one with the calls, one after their results.
    assert order == ["messageStarted", "toolsOffered", "toolCallStarted", "toolCallFinished", "toolCallStarted",
                     "toolCallFinished", "toolsOffered", "messageCompleted"]
    finished = [e["event"]["toolCall"] for e in evs if e["event"]["kind"] == "toolCallFinished"]
    assert [c["status"] for c in finished] == ["success", "success"]
    assert finished[0]["renderPlan"] and finished[0]["messageId"] == turn["messageId"]
    assert "Results of 2 tool calls" in text_of(evs)

    files = await sidecar.request("workspace/files", {"chatId": chat_id})
    assert [f["path"] for f in files["files"]] == ["notes/a.txt"]
    got = await sidecar.request("chats/get", {"id": chat_id})
    reply = next(m for m in got["messages"] if m["id"] == turn["messageId"])
    assert reply["status"] == "complete" and reply["stopReason"] == "endTurn" and reply["manifestId"]
    assert [c["toolId"] for c in reply["toolCalls"]] == ["write_file", "read_file"]
    assert got["chat"]["activeLeafId"] == turn["messageId"]


async def test_bad_calls_go_back_to_the_model_and_the_turn_goes_on(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    pid = await scripted(sidecar, "bad-calls",
                         {"text": "trying", "toolCalls": [{"tool": "no_such_tool", "args": {}},
                                                          {"tool": "write_file", "args": {"path": 7, "content": ""}},
                                                          {"tool": "write_file", "rawArgs": "{not json"}]},
                         {"text": "gave up"})
    turn = await send(sidecar, chat_id, "go", provider=pid)
    assert turn["stopReason"] == "endTurn"
    evs = events(sidecar, turn["messageId"])
    failed = [e["event"]["toolCall"] for e in evs if e["event"]["kind"] == "toolCallFinished"]
    assert [c["errorKind"] for c in failed] == ["unknown_tool", "arguments", "arguments"]
    assert "write_file" in failed[0]["error"]  # names the tools there are
    assert failed[1]["error"].startswith("args.path: ")
    assert text_of(evs) == "tryinggave up"


async def test_confirmation_allow_chat_is_remembered_and_deny_tells_the_model(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    asked: list[dict[str, Any]] = []
    answers = iter([{"decision": "deny"}, {"decision": "allowChat"}])
    sidecar.handle("ui/confirmToolCall", lambda p: asked.append(p) or next(answers))
    cmd = tool_line("run_command", {"command": "echo hi > out.txt"})

    denied = await send(sidecar, chat_id, cmd)
    calls = [e["event"]["toolCall"] for e in events(sidecar, denied["messageId"])
             if e["event"]["kind"] == "toolCallFinished"]
    assert calls[0]["errorKind"] == "denied" and "denied" in calls[0]["error"]
    assert asked[0]["toolId"] == "run_command" and asked[0]["args"] == {"command": "echo hi > out.txt"}
    assert asked[0]["toolCallId"] == calls[0]["id"]

    await send(sidecar, chat_id, cmd)  # allowChat
    await send(sidecar, chat_id, cmd)  # not asked again in this chat
    assert len(asked) == 2
    other = await new_chat(sidecar)
    sidecar.handle("ui/confirmToolCall", lambda p: asked.append(p) or {"decision": "allowOnce",
                                                                       "args": {"command": "echo edited > e.txt"}})
    await send(sidecar, other, cmd)  # another chat asks again; the edited command runs
    assert len(asked) == 3
    files = await sidecar.request("workspace/files", {"chatId": other})
    assert [f["path"] for f in files["files"]] == ["e.txt"]


async def test_cancel_while_waiting_for_confirmation_stops_the_turn_and_keeps_the_text(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    request_id = sidecar.new_id()
    await sidecar.send({"jsonrpc": "2.0", "id": request_id, "method": "chat/send",
                        "params": {"chatId": chat_id, "content": "first words\n" + tool_line(
                            "run_command", {"command": "sleep 1"})}})
    ask = await sidecar.wait_for(lambda: next((r for r in sidecar.server_requests
                                               if r["method"] == "ui/confirmToolCall"), None))
    await sidecar.notify("$/cancelRequest", {"id": request_id})
    answer = await sidecar.expect(request_id)(10)
    assert answer["result"]["stopReason"] == "cancelled"
    # The sidecar withdrew its question.
    await sidecar.wait_notification("$/cancelRequest", lambda p: p["id"] == ask["id"])
    got = await sidecar.request("chats/get", {"id": chat_id})
    reply = next(m for m in got["messages"] if m["id"] == answer["result"]["messageId"])
    assert reply["status"] == "cancelled" and reply["content"].startswith("Running 1 tool")
    again = await send(sidecar, chat_id, "still here?")  # the chat is free again
    assert again["stopReason"] == "endTurn"


async def test_cancel_during_a_slow_stream_and_one_turn_per_chat(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    pid = await scripted(sidecar, "slow", {"text": "word " * 400, "delayMs": 5})
    request_id = sidecar.new_id()
    await sidecar.send({"jsonrpc": "2.0", "id": request_id, "method": "chat/send",
                        "params": {"chatId": chat_id, "content": "go", "provider": pid}})
    await sidecar.wait_for(lambda: any(n["method"] == "chat/event" and n["params"]["event"]["kind"] == "textDelta"
                                       for n in sidecar.notifications))
    with pytest.raises(RemoteError) as busy:
        await send(sidecar, chat_id, "me too")
    assert busy.value.code == -32011
    with pytest.raises(RemoteError) as busy:
        await sidecar.request("chats/switchBranch", {"chatId": chat_id, "messageId": "x"})
    assert busy.value.code == -32011
    other = await new_chat(sidecar)  # another chat runs meanwhile
    assert (await send(sidecar, other, "parallel"))["stopReason"] == "endTurn"
    await sidecar.notify("$/cancelRequest", {"id": request_id})
    answer = (await sidecar.expect(request_id)(10))["result"]
    assert answer["stopReason"] == "cancelled"
    evs = events(sidecar, answer["messageId"])
    assert kinds(evs)[-1] == "messageCompleted" and evs[-1]["event"]["stopReason"] == "cancelled"
    streamed = text_of(evs)
    assert 0 < len(streamed) < len("word " * 400)
    got = await sidecar.request("chats/get", {"id": chat_id})
    assert next(m for m in got["messages"] if m["id"] == answer["messageId"])["content"] == streamed


async def test_provider_failure_mid_stream_keeps_the_partial_message(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    pid = await scripted(sidecar, "cut", {"text": "half an ans", "error": "the stream was cut"})
    turn = await send(sidecar, chat_id, "go", provider=pid)
    assert turn["stopReason"] == "error" and "cut" in turn["error"]
    evs = events(sidecar, turn["messageId"])
    err = next(e["event"] for e in evs if e["event"]["kind"] == "error")
    assert err["code"] == -32020 and err["retryable"] is True
    got = await sidecar.request("chats/get", {"id": chat_id})
    reply = next(m for m in got["messages"] if m["id"] == turn["messageId"])
    assert reply["content"] == "half an ans" and reply["status"] == "error"


async def test_max_turns_and_bad_input(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    loop = {"text": "again ", "toolCalls": [{"tool": "list_files", "args": {}}]}
    pid = await scripted(sidecar, "loops", loop, loop, loop, loop)
    turn = await send(sidecar, chat_id, "go", provider=pid, maxTurns=2)
    assert turn["stopReason"] == "maxTurns"
    for params, code in [({"chatId": "nope", "content": "x"}, -32010),
                         ({"chatId": chat_id, "content": "x", "parentId": "nope"}, -32010),
                         ({"chatId": chat_id, "content": "x", "provider": "nope"}, -32010),
                         ({"chatId": chat_id, "content": "x", "maxTurns": 0}, -32602),
                         ({"chatId": chat_id, "content": "x", "attachments": [{"kind": "toolset", "id": "nope"}]},
                          -32010)]:
        reply = await sidecar.request_raw("chat/send", params)
        assert reply["error"]["code"] == code, (params, reply)
    assert (await send(sidecar, chat_id, "fine"))["stopReason"] == "endTurn"


async def test_branches_bring_back_their_files(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    first = await send(sidecar, chat_id, tool_line("write_file", {"path": "v.txt", "content": "first"}))
    question = first["userMessageId"]
    # Edit the first question: parentId null starts a new first message, with no files yet.
    second = await send(sidecar, chat_id, tool_line("write_file", {"path": "w.txt", "content": "second"}),
                        parentId=None)
    assert await files(sidecar, chat_id) == ["w.txt"]
    # Retry the first answer: a new branch from the first question, with the files as they were
    # before that answer wrote v.txt.
    retry = await send(sidecar, chat_id, "retry", parentId=question)
    assert retry["stopReason"] == "endTurn"
    assert await files(sidecar, chat_id) == []
    switched = await sidecar.request("chats/switchBranch", {"chatId": chat_id, "messageId": first["messageId"]})
    assert switched["chat"]["activeLeafId"] == first["messageId"]
    assert await files(sidecar, chat_id) == ["v.txt"]
    await sidecar.request("chats/switchBranch", {"chatId": chat_id, "messageId": second["messageId"]})
    assert await files(sidecar, chat_id) == ["w.txt"]


async def files(sc: SidecarClient, chat_id: str) -> list[str]:
    return [f["path"] for f in (await sc.request("workspace/files", {"chatId": chat_id}))["files"]]


async def test_attached_toolset_tools_join_the_chat_even_when_disabled(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    toolset = (await sidecar.request("toolsets/import", {"path": str(folder)}))["toolset"]["id"]
    await sidecar.request("toolsets/setEnabled", {"id": toolset, "enabled": False})
    chat_id = await new_chat(sidecar)
    pid = await scripted(sidecar, "attach",
                         {"text": "x", "toolCalls": [{"tool": f"{toolset}:write_file", "args": {"path": "w.txt", "content": "a b"}}]},
                         {"text": "done"},
                         # The same tool name from two sources: each keeps its own alias.
                         {"text": "x", "toolCalls": [{"tool": f"{toolset}:write_file", "args": {"path": "w.txt", "content": "a b"}},
                                                     {"tool": "write_file", "args": {"path": "b.txt", "content": "c"}}]},
                         {"text": "done"})
    before = await send(sidecar, chat_id, "count", provider=pid)
    call = next(e["event"]["toolCall"] for e in events(sidecar, before["messageId"])
                if e["event"]["kind"] == "toolCallFinished")
    assert call["errorKind"] == "unknown_tool"  # not offered: the toolset is off
    after = await send(sidecar, chat_id, "count", provider=pid,
                       attachments=[{"kind": "toolset", "id": toolset}])
    started = next(e["event"] for e in events(sidecar, after["messageId"]) if e["event"]["kind"] == "toolCallStarted")
    assert started["toolName"] == f"{toolset}.write_file"
    finished = [e["event"]["toolCall"] for e in events(sidecar, after["messageId"])
                if e["event"]["kind"] == "toolCallFinished"]
    assert [(c["toolId"], c["status"]) for c in finished] == [(f"{toolset}:write_file", "success"),
                                                              ("write_file", "success")], finished
    assert await files(sidecar, chat_id) == ["b.txt", "w.txt"]
    got = await sidecar.request("chats/get", {"id": chat_id})
    user = next(m for m in got["messages"] if m["id"] == after["userMessageId"])
    assert user["attachments"] == [{"kind": "toolset", "id": toolset}]


async def test_direct_invocation_becomes_a_message_with_its_call(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    ran = await sidecar.request("chat/invokeTool", {"chatId": chat_id, "toolId": "write_file",
                                                    "args": {"path": "p.txt", "content": "palette"}})
    assert ran["message"]["role"] == "tool" and ran["toolCall"]["status"] == "success"
    assert ran["toolCall"]["renderPlan"] and ran["message"]["manifestId"]
    assert ran["chat"]["activeLeafId"] == ran["message"]["id"]
    bad = await sidecar.request_raw("chat/invokeTool", {"chatId": chat_id, "toolId": "write_file", "args": {}})
    assert bad["error"]["code"] == -32602
    got = await sidecar.request("chats/get", {"id": chat_id})
    assert len(got["messages"]) == 1  # the refused call left nothing behind
    # The next turn's model hears of it.
    pid = await scripted(sidecar, "hears", {"text": "ok"})
    turn = await send(sidecar, chat_id, "what did I run?", provider=pid)
    assert turn["stopReason"] == "endTurn"


async def test_big_results_go_to_a_workspace_file(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    big = "x" * 40_000
    await send(sidecar, chat_id, tool_line("write_file", {"path": "big.txt", "content": big}))
    turn = await send(sidecar, chat_id, tool_line("read_file", {"path": "big.txt"}))
    names = [f["path"] for f in (await sidecar.request("workspace/files", {"chatId": chat_id}))["files"]]
    spilled = [n for n in names if n.startswith(".tool-results/")]
    assert len(spilled) == 1
    text = await sidecar.request("workspace/readFile", {"chatId": chat_id, "path": spilled[0]})
    assert big in text["text"]
    assert turn["stopReason"] == "endTurn"


async def test_ui_gone_mid_turn_stops_cleanly_and_keeps_what_was_said(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as sc:
        chat_id = await new_chat(sc)
        pid = await scripted(sc, "slow", {"text": "word " * 2000, "delayMs": 5})
        await sc.send({"jsonrpc": "2.0", "id": sc.new_id(), "method": "chat/send",
                       "params": {"chatId": chat_id, "content": "go", "provider": pid}})
        await sc.wait_for(lambda: sum(n["method"] == "chat/event" for n in sc.notifications) > 3)
        await sc.close_stdin()
        assert await sc.wait_exit() == 0
    async with SidecarClient.spawn(data_dir) as sc:
        got = await sc.request("chats/get", {"id": chat_id})
        reply = next(m for m in got["messages"] if m["role"] == "assistant")
        assert reply["status"] == "cancelled" and reply["content"].startswith("word word")


async def test_allow_always_holds_until_the_tool_changes(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    toolset = (await sidecar.request("toolsets/import", {"path": str(folder)}))["toolset"]["id"]
    asked: list[dict[str, Any]] = []
    sidecar.handle("ui/confirmToolCall", lambda p: asked.append(p) or {"decision": "allowAlways"})
    line = tool_line(f"{toolset}:run_command", {"command": "echo hi"})
    for _ in range(2):
        await send(sidecar, await new_chat(sidecar), line)
    assert len(asked) == 1  # remembered across chats
    await sidecar.request("tools/setOverride", {"toolsetId": toolset, "toolId": "run_command",
                                                "descriptionOverride": "Run anything at all"})
    await send(sidecar, await new_chat(sidecar), line)
    assert len(asked) == 2  # the tool the user allowed is not the tool it is now: ask again


async def test_cancel_stops_a_running_tool(sidecar: SidecarClient):
    chat_id = await new_chat(sidecar)
    sidecar.handle("ui/confirmToolCall", lambda p: {"decision": "allowOnce"})
    request_id = sidecar.new_id()
    await sidecar.send({"jsonrpc": "2.0", "id": request_id, "method": "chat/send",
                        "params": {"chatId": chat_id, "content": tool_line("run_command", {"command": "sleep 30"})}})
    await sidecar.wait_for(lambda: any(n["method"] == "chat/event" and n["params"]["event"]["kind"] == "toolCallStarted"
                                       for n in sidecar.notifications))
    await sidecar.notify("$/cancelRequest", {"id": request_id})
    with anyio.fail_after(10):  # not the 30 s of the command
        answer = (await sidecar.expect(request_id)(10))["result"]
    assert answer["stopReason"] == "cancelled"
    got = await sidecar.request("chats/get", {"id": chat_id})
    reply = next(m for m in got["messages"] if m["id"] == answer["messageId"])
    assert [c["errorKind"] for c in reply["toolCalls"]] == ["cancelled"]


async def test_an_attached_mcp_server_brings_its_tools_under_its_name(sidecar: SidecarClient):
    from tests.e2e.test_mcp import add, status

    await add(sidecar, "basic")
    assert (await status(sidecar, "basic~basic", "connected", "error"))["status"] == "connected"
    chat_id = await new_chat(sidecar)
    pid = await scripted(sidecar, "mcp-attach",
                         {"text": "x", "toolCalls": [{"tool": "mcp:basic~basic:echo", "args": {"text": "hey"}}]},
                         {"text": "done"})
    turn = await send(sidecar, chat_id, "echo", provider=pid, attachments=[{"kind": "mcpServer", "id": "basic"}])
    evs = events(sidecar, turn["messageId"])
    started = next(e["event"] for e in evs if e["event"]["kind"] == "toolCallStarted")
    assert started["toolName"] == "basic.echo"
    finished = next(e["event"]["toolCall"] for e in evs if e["event"]["kind"] == "toolCallFinished")
    assert finished["status"] == "success" and finished["result"]["content"][0]["text"] == "hey"
    got = await sidecar.request("chats/get", {"id": chat_id})
    user = next(m for m in got["messages"] if m["id"] == turn["userMessageId"])
    assert user["attachments"] == [{"kind": "mcpServer", "id": "basic~basic"}]  # stored by its key


async def test_a_tool_switched_off_by_override_stays_off_when_its_toolset_is_attached(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    toolset = (await sidecar.request("toolsets/import", {"path": str(folder)}))["toolset"]["id"]
    await sidecar.request("tools/setOverride", {"toolsetId": toolset, "toolId": "write_file", "enabled": False})
    chat_id = await new_chat(sidecar)
    pid = await scripted(sidecar, "off",
                         {"text": "x", "toolCalls": [{"tool": f"{toolset}:write_file", "args": {"path": "w.txt", "content": "a"}}]},
                         {"text": "done"})
    turn = await send(sidecar, chat_id, "write", provider=pid, attachments=[{"kind": "toolset", "id": toolset}])
    finished = [e["event"]["toolCall"] for e in events(sidecar, turn["messageId"])
                if e["event"]["kind"] == "toolCallFinished"]
    assert [c["status"] for c in finished] == ["error"], finished
    assert await files(sidecar, chat_id) == []
    listed = (await sidecar.request("tools/list", {"chatId": chat_id}))["tools"]
    assert f"{toolset}:write_file" not in [t["id"] for t in listed]


async def test_tools_list_of_a_chat_shows_what_its_turns_offer(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    toolset = (await sidecar.request("toolsets/import", {"path": str(folder)}))["toolset"]["id"]
    await sidecar.request("toolsets/setEnabled", {"id": toolset, "enabled": False})
    chat_id = await new_chat(sidecar)
    plain = {t["id"]: t for t in (await sidecar.request("tools/list", {"chatId": chat_id}))["tools"]}
    assert "write_file" in plain and f"{toolset}:write_file" not in plain
    pid = await scripted(sidecar, "quiet", {"text": "ok"})
    await send(sidecar, chat_id, "hi", provider=pid, attachments=[{"kind": "toolset", "id": toolset}])
    listed = {t["id"]: t for t in (await sidecar.request("tools/list", {"chatId": chat_id}))["tools"]}
    assert listed[f"{toolset}:write_file"]["name"] == f"{toolset}.write_file"
    assert listed["write_file"]["name"] == plain["write_file"]["name"]
    other = await new_chat(sidecar)  # another chat has no attachment
    assert f"{toolset}:write_file" not in [t["id"] for t in (await sidecar.request("tools/list", {"chatId": other}))["tools"]]
    missing = await sidecar.request_raw("tools/list", {"chatId": "nope"})
    assert missing["error"]["code"] == -32010
