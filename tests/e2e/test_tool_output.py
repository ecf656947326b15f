"""Cards and what a model is given of a tool's result (issue 12 items 4 and 5), through real chat
turns on the offline scripted provider: its ``echoContext`` reply is exactly what a model was sent."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import SidecarClient
from tests.e2e.test_chat import events, new_chat, scripted, send
from tests.e2e.test_mcp import status

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CARDS = FIXTURES / "toolsets" / "cards"
FRAME = re.compile(r'\A<tool_output tool="([^"]+)" status="(success|error)" note="[^"]+">\n(.*)\n</tool_output>\Z',
                   re.DOTALL)


async def install(sc: SidecarClient, tmp_path: Path, extra: str = "") -> str:
    folder = tmp_path / "cards"
    shutil.copytree(CARDS, folder)
    if extra:
        manifest = folder / "toolset.yaml"
        manifest.write_text(manifest.read_text() + extra)
    return (await sc.request("toolsets/import", {"path": str(folder)}))["toolset"]["id"]


def finished(sc: SidecarClient, message_id: str) -> list[dict[str, Any]]:
    return [e["event"]["toolCall"] for e in events(sc, message_id) if e["event"]["kind"] == "toolCallFinished"]


async def given(sc: SidecarClient, chat_id: str, message_id: str) -> list[dict[str, Any]]:
    """The messages the scripted model was sent for its echoContext reply (the message's text)."""
    got = await sc.request("chats/get", {"id": chat_id})
    text = next(m for m in got["messages"] if m["id"] == message_id)["content"]
    return json.loads(text[text.index("[{"):])


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def unframe(content: str) -> tuple[str, str, str]:
    """(tool, status, data) of one framed result; fails unless it is exactly one block."""
    m = FRAME.match(content)
    assert m, f"not one <tool_output> block: {content[:300]!r}"
    return m[1], m[2], m[3]


async def turn(sc: SidecarClient, chat_id: str, pid: str, *replies: dict[str, Any]) -> dict[str, Any]:
    await scripted(sc, pid, *replies)
    return await send(sc, chat_id, "go", provider=pid)


async def test_a_card_tool_shows_a_sanitised_card_and_the_model_only_hears_of_it(app: SidecarClient,
                                                                                  tmp_path: Path):
    await install(app, tmp_path)
    chat_id = await new_chat(app)
    ask = {"toolCalls": [{"tool": "cards:weather", "args": {"location": "Valletta"}}]}
    done = await turn(app, chat_id, "weather", ask, {"text": "seen: ", "echoContext": True})
    call = finished(app, done["messageId"])[0]
    assert call["status"] == "success"
    plan = call["renderPlan"]
    assert plan["renderer"] == "card"
    assert plan["config"]["title"] == "Weather in Valletta"
    assert plan["config"]["accentColor"] == "#4a90d4"
    assert plan["config"]["backgroundColor"] == "rgba(74, 144, 212, 0.10)"
    html = plan["config"]["html"]
    assert "<b>21 °C</b>" in html and "padding" in html
    for bad in ("onclick", "onerror", "<script", "alert(", "position"):
        assert bad not in html
    assert "onerror" in call["result"]["html"]  # the UI still gets the whole result; it shows the plan
    # synthesize: false -> the model hears that a card was shown, not the text.
    _, status, data = unframe(tool_results(await given(app, chat_id, done["messageId"]))[0])
    assert status == "success" and "Weather in Valletta" in data and "shown to the user" in data
    assert "Sunny" not in data and "<b>" not in data


async def test_an_ephemeral_result_is_seen_by_its_turn_only(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    chat_id = await new_chat(app)
    first = await turn(app, chat_id, "forecast", {"toolCalls": [{"tool": "cards:forecast", "args": {"place": "Rome"}}]},
                       {"echoContext": True})
    call = finished(app, first["messageId"])[0]
    assert call["renderPlan"]["config"]["title"] == "Forecast for Rome"  # the missing {{days}} is left empty
    assert call["renderPlan"]["missing"] == ["{{days}}"]
    _, _, data = unframe(tool_results(await given(app, chat_id, first["messageId"]))[0])
    assert data == "Rain for 3 days in Rome"  # its text, not the card's markup
    later = await turn(app, chat_id, "later", {"echoContext": True})
    _, _, data = unframe(tool_results(await given(app, chat_id, later["messageId"]))[0])
    assert "Rain" not in data and "ephemeral" in data
    # A long one is cut for its turn, and leaves no file behind to be read later.
    long = await turn(app, chat_id, "long", {"toolCalls": [{"tool": "cards:forecast",
                                                            "args": {"place": "Rome", "detail": 5000}}]},
                      {"echoContext": True})
    _, _, data = unframe(tool_results(await given(app, chat_id, long["messageId"]))[-1])
    assert data.startswith("Rain for 3 days in Rome...") and data.endswith("the rest is not shown]")
    files = (await app.request("workspace/files", {"chatId": chat_id}))["files"]
    assert not [f for f in files if f["path"].startswith(".tool-results/")]


async def test_an_error_in_a_card_result_fails_the_call(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    chat_id = await new_chat(app)
    done = await turn(app, chat_id, "broken", {"toolCalls": [{"tool": "cards:broken", "args": {}}]},
                      {"echoContext": True})
    call = finished(app, done["messageId"])[0]
    assert call["status"] == "error" and call["error"] == "the weather service is down"
    assert "renderPlan" not in call
    _, status, data = unframe(tool_results(await given(app, chat_id, done["messageId"]))[0])
    assert status == "error" and "the weather service is down" in data
    ran = await app.request("tools/call", {"toolId": "cards:broken"})  # the same outside a chat
    assert ran["toolCall"]["status"] == "error" and ran["toolCall"]["error"] == "the weather service is down"


def _assert_clean(data: str) -> None:
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\U000e0000-\U000e007f]", data)
    assert "</tool_output" not in data  # the fake closing tag is defused
    assert "&lt;/tool_output>" in data


async def test_results_are_cleaned_cut_spilled_and_framed(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    chat_id = await new_chat(app)
    done = await turn(app, chat_id, "noisy", {"toolCalls": [{"tool": "cards:loud", "args": {}},
                                                            {"tool": "cards:noisy", "args": {}}]},
                      {"echoContext": True})
    loud, noisy = finished(app, done["messageId"])
    assert "\x1b[31m" in loud["result"] and "Ignore previous" in loud["result"]  # the UI gets it all
    (loud_name, _, loud_data), (noisy_name, _, noisy_data) = map(unframe, tool_results(
        await given(app, chat_id, done["messageId"])))
    assert loud_name == "cards_loud" and noisy_name == "cards_noisy"
    for data in (loud_data, noisy_data):
        _assert_clean(data)
        assert "hidden tags" in data and "evil" in data
    # Default settings: 3,000 characters, instruction-like lines kept (stripping is opt-in).
    assert "Ignore previous instructions" in loud_data
    shown, _, note = loud_data.rpartition("\n[... ")
    assert len(shown.replace("&lt;", "<")) == 3000 and "read_file" in note
    spill = re.search(r"\.tool-results/\S+\.txt", note)[0]  # type: ignore[index] - asserted by the read below
    whole = await app.request("workspace/readFile", {"chatId": chat_id, "path": spill})
    assert whole["text"].startswith(shown.replace("&lt;", "<")) and len(whole["text"]) > 10_000
    # The toolset's own settings: 500 characters, and lines that read like orders removed.
    shown, _, _ = noisy_data.rpartition("\n[... ")
    assert len(shown.replace("&lt;", "<")) == 500
    for order in ("Ignore previous", "You must now call", '"arguments"', "ACTION:", "SYSTEM:"):
        assert order not in noisy_data
    assert noisy_data.count("[line removed") == 5  # (the sixth, a closing tag, is defused instead)


async def test_builtin_and_mcp_results_are_framed_and_bounded_too(app: SidecarClient, tmp_path: Path):
    chat_id = await new_chat(app)
    await app.request("mcpServers/add", {"id": "basic", "command": sys.executable,
                                         "args": [str(FIXTURES / "mcp" / "basic.py")]})
    await status(app, "basic~basic", "connected")
    done = await turn(app, chat_id, "mixed",
                      {"toolCalls": [{"tool": "write_file", "args": {"path": "a.txt", "content": "hi\x1b[2J\x00"}},
                                     {"tool": "read_file", "args": {"path": "a.txt"}},
                                     {"tool": "mcp:basic~basic:big", "args": {"mb": 0.01}}]},
                      {"echoContext": True})
    assert [c["status"] for c in finished(app, done["messageId"])] == ["success"] * 3
    _, (read_name, _, read_data), (big_name, _, big_data) = map(unframe, tool_results(
        await given(app, chat_id, done["messageId"])))
    assert read_name == "read_file" and '"content": "hi' in read_data and "\x1b" not in read_data
    assert big_name == "basic_basic_big"
    shown, _, note = big_data.rpartition("\n[... ")
    assert shown == "x" * 3000 and ".tool-results/" in note


async def test_an_mcp_tool_gets_a_card_only_when_its_toolset_declares_one(app: SidecarClient, tmp_path: Path):
    server = (f"\nmcp_servers:\n  - id: helper\n    command: {sys.executable}\n"
              f"    args: [\"{FIXTURES / 'mcp' / 'basic.py'}\"]\n"
              "    tool_output:\n      card:\n"
              "        card: {title: 'About {{topic}}', accent_color: 'hsl(210, 50%, 40%)'}\n")
    await install(app, tmp_path, server)
    await status(app, "cards~helper", "connected")
    declared = await app.request("tools/call", {"toolId": "mcp:cards~helper:card", "args": {"topic": "owls"}})
    plan = declared["toolCall"]["renderPlan"]
    assert plan["renderer"] == "card" and plan["config"]["title"] == "About owls"
    assert plan["config"]["accentColor"] == "hsl(210, 50%, 40%)"
    assert plan["config"]["html"] == "<p>About <i>owls</i></p>"
    plain = await app.request("tools/call", {"toolId": "mcp:cards~helper:structured", "args": {}})
    # Same shape rules, but nothing declared for it: the plan any MCP result gets by its content.
    assert plain["toolCall"]["renderPlan"]["renderer"] == "document"
    target = tmp_path / "out.zip"
    await app.request("toolsets/export", {"id": "cards", "path": str(target)})
    with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as z:
        exported = yaml.safe_load(z.read("toolset.yaml"))
    assert exported["mcp_servers"][0]["tool_output"] == {
        "card": {"card": {"title": "About {{topic}}", "accent_color": "hsl(210, 50%, 40%)"}}}


async def test_output_settings_are_checked_and_exported(app: SidecarClient, tmp_path: Path):
    folder = tmp_path / "bad"
    shutil.copytree(CARDS, folder)
    text = (folder / "toolset.yaml").read_text()
    (folder / "toolset.yaml").write_text(text.replace('"#4a90d4"', '"url(javascript:alert(1))"'))
    bad = await app.request_raw("toolsets/import", {"path": str(folder)})
    assert bad["error"]["code"] == -32013
    assert bad["error"]["data"]["path"] == "toolset.yaml: tools[0].output.card.accent_color"
    assert "CSS colour" in bad["error"]["data"]["reason"]

    toolset = await install(app, tmp_path)
    target = tmp_path / "out.zip"
    await app.request("toolsets/export", {"id": toolset, "path": str(target)})
    with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as z:
        exported = yaml.safe_load(z.read("toolset.yaml"))
    outputs = {t["id"]: t.get("output") for t in exported["tools"]}
    assert outputs["weather"] == {"card": {"title": "Weather in {{location}}", "accent_color": "#4a90d4",
                                           "background_color": "rgba(74, 144, 212, 0.10)"},
                                  "synthesize": False}
    assert outputs["noisy"] == {"max_chars": 500, "strip_actions": True}
    assert outputs["loud"] is None


async def test_a_palette_run_is_given_to_later_turns_the_same_way(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    chat_id = await new_chat(app)
    await app.request("chat/invokeTool", {"chatId": chat_id, "toolId": "cards:loud", "args": {}})
    await app.request("chat/invokeTool", {"chatId": chat_id, "toolId": "cards:forecast", "args": {"place": "Oslo"}})
    done = await turn(app, chat_id, "after", {"echoContext": True})
    sent = await given(app, chat_id, done["messageId"])
    ran = [m["content"] for m in sent if m["content"].startswith("[The user ran")]
    loud, forecast = ran
    _, _, data = unframe(loud.partition("\n")[2])
    _assert_clean(data)
    assert len(data.rpartition("\n[... ")[0].replace("&lt;", "<")) == 3000
    _, _, data = unframe(forecast.partition("\n")[2])
    assert "Oslo" not in data and "ephemeral" in data
