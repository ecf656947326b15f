"""What an MCP server says about its tools reaches the UI and the model: annotations, titles,
icons and output schemas; confirmation by the tools' hints; results checked against their schema;
default render plans by content; server logs as notifications."""

from __future__ import annotations

import base64
import json
import socket
import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.timing import scaled

pytestmark = pytest.mark.anyio

META = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "meta.py"
PREFIX = "mcp:meta~meta:"


async def add_meta(sc: SidecarClient, **extra: object) -> None:
    await sc.request("mcpServers/add", {"id": "meta", "command": sys.executable, "args": [str(META)]} | extra)
    with anyio.fail_after(scaled(30)):
        while True:
            server = (await sc.request("mcpServers/list"))["servers"][0]
            if server["status"] == "connected":
                return
            assert server["status"] == "connecting", server
            await anyio.sleep(0.05)


async def tools(sc: SidecarClient) -> dict[str, dict]:
    return {t["id"].removeprefix(PREFIX): t for t in (await sc.request("tools/list"))["tools"]
            if t["id"].startswith(PREFIX)}


async def call(sc: SidecarClient, name: str, args: dict | None = None) -> dict:
    return (await sc.request("tools/call", {"toolId": PREFIX + name, "args": args or {}}, timeout=60))["toolCall"]


async def test_hints_title_icons_and_output_schema_reach_the_ui_and_set_confirmation(app: SidecarClient):
    await add_meta(app)
    found = await tools(app)

    listing = found["list_notes"]
    assert listing["name"] == listing["title"] == "List notes"
    assert listing["annotations"] == {"readOnlyHint": True}
    # Only the https icon: a javascript: or plain http: src never reaches the UI.
    assert listing["icons"] == [{"src": "https://example.com/notes.png", "mimeType": "image/png", "sizes": ["48x48"]}]
    assert found["wrong_shape"]["outputSchema"]["required"] == ["city"]
    assert "annotations" not in found["plain"] and "icons" not in found["plain"]

    asks = {name: t["requiresConfirmation"] for name, t in found.items()}
    assert asks["list_notes"] is False and asks["read_note"] is False  # read-only
    assert asks["delete_note"] is True  # destructive
    assert asks["fetch_page"] is True  # open-world
    assert asks["add_note"] is False  # neither destructive nor open-world nor read-only
    assert asks["plain"] is False  # no hints: the server's setting (off)

    got = (await app.request("tools/get", {"id": PREFIX + "delete_note"}))["tool"]
    assert got["annotations"]["destructiveHint"] is True and got["requiresConfirmation"] is True

    # The user's override wins over the hints, both ways.
    await app.request("tools/setOverride", {"toolsetId": "meta", "toolId": PREFIX + "delete_note",
                                            "requiresConfirmation": False})
    await app.request("tools/setOverride", {"toolsetId": "meta", "toolId": PREFIX + "read_note",
                                            "requiresConfirmation": True})
    found = await tools(app)
    assert found["delete_note"]["requiresConfirmation"] is False
    assert found["read_note"]["requiresConfirmation"] is True


async def test_a_server_that_asks_for_every_tool_asks_for_read_only_ones_too(app: SidecarClient):
    await add_meta(app, requiresConfirmation=True)
    assert {t["requiresConfirmation"] for t in (await tools(app)).values()} == {True}


async def test_structured_content_that_breaks_the_output_schema_fails_the_call(app: SidecarClient):
    await add_meta(app)
    bad = await call(app, "wrong_shape")
    assert bad["status"] == "error" and bad["errorKind"] == "badOutput"
    assert bad["error"] == "result.structuredContent.city: expected string, got integer"
    assert bad["result"]["structuredContent"] == {"city": 3}  # the audit trail keeps what came back
    good = await call(app, "right_shape")
    assert good["status"] == "success" and good["result"]["structuredContent"] == {"city": "Oslo"}
    # The MCP spec: a tool with an outputSchema MUST return structuredContent.
    bare = await call(app, "no_structure")
    assert bare["status"] == "error" and bare["errorKind"] == "badOutput"
    assert bare["error"].startswith("result.structuredContent: missing;")


async def test_an_output_schema_pointing_at_a_url_is_never_fetched(app: SidecarClient):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/schema.json"
        await add_meta(app, env={"META_REF_URL": url})
        assert (await tools(app))["remote_ref"]["outputSchema"]["properties"]["city"] == {"$ref": url}
        record = await call(app, "remote_ref")
        assert record["status"] == "error" and record["errorKind"] == "badOutput"
        assert record["error"] == (f"the tool's outputSchema cannot be checked: it refers to {url!r}, which is not "
                                   "inside the schema (remote references are never fetched)")
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody knocked


def logs(sc: SidecarClient) -> list[dict]:
    return [n["params"] for n in sc.notifications if n.get("method") == "mcpServers/log"]


async def test_a_servers_log_level_is_edited_in_place(app: SidecarClient):
    await add_meta(app)
    assert (await call(app, "level"))["result"]["content"][0]["text"] == "unset"  # none asked for: all it sends
    server = (await app.request("mcpServers/update", {"id": "meta~meta", "logLevel": "error"}))["server"]
    assert server["logLevel"] == "error"
    with anyio.fail_after(scaled(30)):
        while (await app.request("mcpServers/list"))["servers"][0]["status"] != "connected":
            await anyio.sleep(0.05)
    assert (await call(app, "level"))["result"]["content"][0]["text"] == "error"


async def test_server_logs_reach_the_ui_at_the_servers_level_and_a_flood_is_dropped_with_a_count(app: SidecarClient):
    await add_meta(app, logLevel="warning")
    server = (await app.request("mcpServers/list"))["servers"][0]
    assert server["logLevel"] == "warning"
    # Set at the server with logging/setLevel...
    assert (await call(app, "level"))["result"]["content"][0]["text"] == "warning"

    # ...and applied to what arrives: chatter cycles debug, info, warning, emergency.
    await call(app, "chatter", {"count": 8})
    await app.wait_for(lambda: len(logs(app)) >= 4)
    assert [(e["server"], e["level"], e["logger"], e["data"]) for e in logs(app)] == [
        ("meta~meta", "warning", "chatter", {"n": 2}), ("meta~meta", "emergency", "chatter", {"n": 3}),
        ("meta~meta", "warning", "chatter", {"n": 6}), ("meta~meta", "emergency", "chatter", {"n": 7})]
    assert all("dropped" not in e for e in logs(app))

    # 1,000 messages as fast as the server can: 500 at warning or above, most of them dropped...
    app.notifications.clear()
    await call(app, "chatter", {"count": 1000})
    # ...and once it is quiet, the UI hears how many, without waiting for the server's next message.
    note = await app.wait_notification("mcpServers/log", lambda p: isinstance(p["data"], str), timeout=10)
    told = note["params"]
    assert told["level"] == "warning" and told["dropped"] > 0
    assert told["data"] == f"{told['dropped']} log messages of this server were dropped: it logged faster than " \
                           "20 a second"
    passed = [e for e in logs(app) if isinstance(e["data"], dict)]
    # Every one of the 500 either reached the UI or was counted in a message that did.
    assert 0 < len(passed) < 500 and len(passed) + sum(e.get("dropped", 0) for e in logs(app)) == 500

    # A message that passes after a drop carries the count itself (the quiet note is not sent then).
    await call(app, "chatter", {"count": 1000})
    await anyio.sleep(0.3)
    await call(app, "chatter", {"count": 4})

    def accounted() -> int:
        entries = logs(app)
        return sum(e.get("dropped", 0) for e in entries) + len([e for e in entries if isinstance(e["data"], dict)])

    # Every message is accounted for once the last count or message arrives (no fixed wait for it).
    await app.wait_for(lambda: accounted() >= 500 + 500 + 2, timeout=10)
    assert accounted() == 500 + 500 + 2


async def test_each_result_gets_a_render_plan_by_its_content_unless_an_override_sets_one(app: SidecarClient):
    await add_meta(app)
    picture = await call(app, "picture")
    assert picture["renderPlan"]["renderer"] == "image"
    assert picture["renderPlan"]["config"] == {"images": [{"index": 1, "mimeType": "image/png"}],
                                               "caption": "a 4x4 picture"}
    assert picture["result"]["content"][1]["type"] == "image"  # what the plan points at
    code = await call(app, "code")
    assert code["renderPlan"]["renderer"] == "code" and code["renderPlan"]["config"]["language"] == "python"
    link = await call(app, "link")
    assert link["renderPlan"] == {"renderer": "document",
                                  "config": {"content": "[Quarterly report](https://example.com/report.pdf)"}}
    assert (await call(app, "read_note", {"id": "1"}))["renderPlan"]["renderer"] == "document"

    await app.request("tools/setOverride", {"toolsetId": "meta", "toolId": PREFIX + "picture", "renderer": "image",
                                            "rendererConfig": {"content": "$return.content.1.data",
                                                               "mimeType": "image/png"}})
    overridden = await call(app, "picture")
    assert overridden["renderPlan"]["config"]["content"] == overridden["result"]["content"][1]["data"]


async def test_a_servers_instructions_are_offered_to_the_model_with_its_tools(app: SidecarClient):
    from tests.e2e.test_chat import new_chat
    from tests.e2e.test_tool_output import given, turn

    await add_meta(app)
    chat_id = await new_chat(app)
    done = await turn(app, chat_id, "notes", {"toolCalls": [{"tool": PREFIX + "picture", "args": {}}]},
                      {"echoContext": True})
    system, *rest = await given(app, chat_id, done["messageId"])
    assert system["role"] == "system"
    assert ('<server_instructions server="meta~meta">\nNotes are kept by id; call list_notes before read_note.\n'
            "</server_instructions>") in system["content"]
    result = next(m["content"] for m in rest if m["role"] == "tool")
    assert "a 4x4 picture\n[image 1: image/png, given to you after this result]" in result


def tool_use_stream(alias: str) -> list[str]:
    """An Anthropic stream in which the model calls ``alias`` with no arguments."""
    def event(kind: str, data: dict) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    return [
        event("message_start", {"message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                            "model": "claude-test", "stop_reason": None, "stop_sequence": None,
                                            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        event("content_block_start", {"index": 0, "content_block": {"type": "tool_use", "id": "toolu_1",
                                                                    "name": alias, "input": {}}}),
        event("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        event("content_block_stop", {"index": 0}),
        event("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                "usage": {"output_tokens": 5}}),
        event("message_stop", {}),
    ]


async def test_the_picture_reaches_the_model_in_the_turn_that_called_the_tool(app: SidecarClient):
    from tests.e2e.test_chat import new_chat, send
    from tests.providers.server import Reply, StreamServer, events

    await add_meta(app)
    models = StreamServer().start()
    try:
        models.queue(Reply(events=tool_use_stream("meta_meta_picture")), Reply(events=events("anthropic_text.sse")))
        await app.request("providers/set", {"id": "claude", "kind": "anthropic", "baseUrl": models.url,
                                            "apiKey": "sk-ant-test-0123456789", "defaultModel": "claude-test"})
        chat_id = await new_chat(app)
        await send(app, chat_id, "draw", provider="claude")
        assert len(models.requests) == 2
        result = models.requests[1].body["messages"][-1]["content"][0]
    finally:
        models.stop()
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    text, image = result["content"]
    assert "a 4x4 picture\n[image 1: image/png, given to you after this result]" in text["text"]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
