"""HTTP tools in the real sidecar process (issue 13): a chat turn asks before running one that
requires confirmation, chat/invokeTool runs one directly, and the key they send (in a header and
in a URL) never shows up in the debug log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "http_example"
KEY = "ek-e2e-Wq8Rt3Yu6Io1"


def finished(sc: SidecarClient, message_id: str) -> list[dict[str, Any]]:
    return [n["params"]["event"]["toolCall"] for n in sc.notifications
            if n["method"] == "chat/event" and n["params"]["messageId"] == message_id
            and n["params"]["event"]["kind"] == "toolCallFinished"]


async def test_http_tools_in_chat_turns_with_confirmation_and_the_palette(sidecar: SidecarClient,
                                                                         http_server: HttpServer):
    http_server.route("POST", "/items", Response(201, json={"id": "n1"}))
    http_server.route("GET", "/items/n1/note", Response(body="new", headers={"Content-Type": "text/plain"}))
    await sidecar.request("toolsets/import", {"path": str(EXAMPLE)})
    await sidecar.request("config/set", {"toolsetId": "http_example", "values": {"api_host": http_server.netloc}})
    await sidecar.request("secrets/set", {"name": "EXAMPLE_API_KEY", "value": KEY})
    chat_id = (await sidecar.request("chats/create", {"title": "t"}))["chat"]["id"]

    asked: list[dict[str, Any]] = []
    sidecar.handle("ui/confirmToolCall", lambda p: asked.append(p) or {"decision": "allowOnce"})
    line = '/tool http_example:create_item {"name": "Desk", "price": 10}'
    turn = await sidecar.request("chat/send", {"chatId": chat_id, "content": line})
    assert turn["stopReason"] == "endTurn"
    assert [a["toolId"] for a in asked] == ["http_example:create_item"]  # requires_confirmation holds
    calls = finished(sidecar, turn["messageId"])
    assert [(c["status"], c["result"]) for c in calls] == [("success", {"id": "n1"})]
    assert http_server.requests_to("/items")[0].json()["name"] == "Desk"

    ran = await sidecar.request("chat/invokeTool", {"chatId": chat_id, "toolId": "http_example:item_note",
                                                    "args": {"id": "n1"}})
    assert ran["message"]["role"] == "tool" and ran["toolCall"]["result"] == "new"
    assert http_server.requests_to("/items/n1/note")[0].query == [("api_key", KEY)]  # the server got it

    log = sidecar.stderr_text()
    assert "/items/n1/note?api_key=" in log  # the request's debug line is there...
    assert KEY not in log  # ...with the key masked, as in the header of the other call
