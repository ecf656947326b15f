"""The app in-process over memory pipes: the same wire as the real process, at unit speed."""

from __future__ import annotations

import pytest

from sidecar.client import RemoteError, SidecarClient

pytestmark = pytest.mark.anyio


async def test_a_chat_turn_runs_a_tool_and_streams_its_events(app: SidecarClient):
    chat = (await app.request("chats/create", {"title": "t"}))["chat"]
    content = '/tool write_file {"path": "notes/a.txt", "content": "hello"}'
    result = await app.request("chat/send", {"chatId": chat["id"], "content": content})
    assert result["stopReason"] == "endTurn"
    kinds = [n["params"]["event"]["kind"] for n in app.notifications if n["method"] == "chat/event"]
    assert kinds[0] == "messageStarted" and kinds[-1] == "messageCompleted"
    assert "toolCallStarted" in kinds and "toolCallFinished" in kinds
    files = await app.request("workspace/files", {"chatId": chat["id"]})
    assert [f["path"] for f in files["files"]] == ["notes/a.txt"]


async def test_tool_calls_and_the_catalog(app: SidecarClient):
    tools = (await app.request("tools/list", {}))["tools"]
    assert "write_file" in {t["id"] for t in tools}
    with pytest.raises(RemoteError) as err:
        await app.request("tools/call", {"toolId": "write_file", "args": {"path": 3}})
    assert err.value.code == -32602
    with pytest.raises(RemoteError) as err:
        await app.request("tools/get", {"id": "nope:nothing"})
    assert err.value.code == -32010


async def test_requests_sent_with_initialize_wait_for_the_services(data_dir):
    async with SidecarClient.in_process(data_dir, initialize=False) as client:
        init = client.expect(1)
        listing = client.expect(2)
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "chats/list"})
        assert "result" in await init(10)
        assert (await listing(10))["result"] == {"chats": []}
    assert client.proc.returncode == 0
