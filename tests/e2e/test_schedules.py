"""A schedule run through the real ``python -m sidecar``: runNow runs the tool in the chat, posts its
output after the prompt as a user message, and the turn it starts streams to the UI."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.schedules.support import write_toolset

pytestmark = pytest.mark.anyio


async def test_run_now_posts_the_output_to_the_chat_and_starts_a_turn(sidecar: SidecarClient, tmp_path: Path):
    await sidecar.request("toolsets/import", {"path": str(write_toolset(tmp_path))})
    chat = (await sidecar.request("chats/create", {"title": "mornings"}))["chat"]["id"]
    schedule = (await sidecar.request("schedules/create", {
        "toolId": "clocked:hello", "args": {"name": "Malta"}, "cron": "0 9 * * 1-5", "chatId": chat,
        "prompt": "Say good morning to:"}))["schedule"]
    call = (await sidecar.request("schedules/runNow", {"id": schedule["id"]}))["toolCall"]
    assert call["status"] == "success" and call["chatId"] == chat and call["result"] == "hello Malta"
    fired = await sidecar.wait_notification("schedules/fired", lambda p: p["scheduleId"] == schedule["id"])
    assert fired["params"]["message"] == "Say good morning to:\n\nhello Malta"
    await sidecar.wait_notification("chat/event", lambda p: p["chatId"] == chat
                                    and p["event"]["kind"] == "messageCompleted")
    messages = (await sidecar.request("chats/get", {"id": chat}))["messages"]
    [user] = [m for m in messages if m["role"] == "user"]
    [reply] = [m for m in messages if m["role"] == "assistant"]
    assert user["content"] == "Say good morning to:\n\nhello Malta"
    assert reply["parentId"] == user["id"] and "hello Malta" in reply["content"]  # the scripted model echoes
    [listed] = (await sidecar.request("schedules/list", {"chatId": chat}))["schedules"]
    assert listed["lastToolCallId"] == call["id"] and listed["lastStatus"] == "success"
    assert listed["nextRunAt"] == schedule["nextRunAt"]  # running it now does not move its next time
    audit = (await sidecar.request("toolCalls/list", {"scheduleId": schedule["id"]}))["toolCalls"]
    assert [(c["id"], c["startedBy"]) for c in audit] == [(call["id"], "schedule")]
    await sidecar.request("chats/delete", {"id": chat})
    with pytest.raises(RemoteError) as gone:
        await sidecar.request("schedules/runNow", {"id": schedule["id"]})
    assert gone.value.code == -32010
    [paused] = (await sidecar.request("schedules/list", {"toolId": "clocked:hello"}))["schedules"]
    assert chat in paused["pausedReason"]
