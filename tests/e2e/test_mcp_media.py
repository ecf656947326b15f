"""Pictures and sound from an MCP tool run outside a model's turn (the "+" palette, a schedule in
a chat) reach the model of the chat's next turn as real content, through the providers' wire, as
a model's own call's pictures do; the text names them."""

from __future__ import annotations

import base64

import anyio
import pytest

from sidecar.chat.providers.base import NO_AUDIO_API
from sidecar.client import SidecarClient
from tests.e2e.test_chat import new_chat, send
from tests.e2e.test_mcp_meta import PREFIX, add_meta
from tests.providers.server import Reply, StreamServer, events
from tests.timing import scaled

pytestmark = pytest.mark.anyio

PICTURE_NAMED = "a 4x4 picture\n[image 1: image/png, given to you after this result]"
SOUND_NAMED = "[audio 1: audio/wav, given to you after this result]"


async def providers(sc: SidecarClient, models: StreamServer) -> None:
    await sc.request("providers/set", {"id": "claude", "kind": "anthropic", "baseUrl": models.url,
                                       "apiKey": "sk-ant-test-0123456789", "defaultModel": "claude-test"})
    await sc.request("providers/set", {"id": "gpt", "kind": "openai", "baseUrl": models.url + "/v1",
                                       "apiKey": "sk-test-0123456789", "defaultModel": "gpt-test",
                                       "config": {"audio": True}})


async def palette(sc: SidecarClient, chat_id: str, tool: str) -> None:
    ran = await sc.request("chat/invokeTool", {"chatId": chat_id, "toolId": PREFIX + tool, "args": {}}, timeout=60)
    assert ran["toolCall"]["status"] == "success"


async def test_a_palette_runs_picture_reaches_the_model_in_the_next_turn(app: SidecarClient):
    await add_meta(app)
    models = StreamServer().start()
    try:
        models.queue(Reply(events=events("anthropic_text.sse")))
        await providers(app, models)
        chat_id = await new_chat(app)
        await palette(app, chat_id, "picture")
        await send(app, chat_id, "what is in it?", provider="claude")
        [request] = models.requests
    finally:
        models.stop()
    # The run and the question: one user message, as Anthropic wants consecutive ones joined.
    [ran] = request.body["messages"]
    text, image, question = ran["content"]
    assert ran["role"] == "user" and PICTURE_NAMED in text["text"]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
    assert question == {"type": "text", "text": "what is in it?"}


async def test_a_palette_runs_sound_reaches_an_audio_model_and_anthropic_is_told_why_not(app: SidecarClient):
    await add_meta(app)
    models = StreamServer().start()
    try:
        models.queue(Reply(events=events("openai_text.sse")), Reply(events=events("anthropic_text.sse")))
        await providers(app, models)
        chat_id = await new_chat(app)
        await palette(app, chat_id, "sound")
        await send(app, chat_id, "what does it say?", provider="gpt")
        await send(app, chat_id, "and now?", provider="claude")
        heard, told = models.requests
    finally:
        models.stop()
    system, ran, question = heard.body["messages"]  # the system message: the server's instructions
    assert system["role"] == "system" and question["content"] == "what does it say?"
    text, clip = ran["content"]
    assert ran["role"] == "user" and SOUND_NAMED in text["text"]
    assert clip["type"] == "input_audio" and clip["input_audio"]["format"] == "wav"
    assert base64.b64decode(clip["input_audio"]["data"]) == b"RIFF0000WAVE"
    said = told.body["messages"][0]["content"][0]["text"]
    assert SOUND_NAMED in said and said.endswith(NO_AUDIO_API)


async def test_a_scheduled_runs_picture_reaches_the_model_of_the_turn_it_starts(app: SidecarClient):
    await add_meta(app)
    models = StreamServer().start()
    try:
        models.queue(Reply(events=events("anthropic_text.sse")), Reply(events=events("anthropic_text.sse")))
        await providers(app, models)
        chat_id = await new_chat(app)
        schedule = (await app.request("schedules/create", {
            "toolId": PREFIX + "picture", "args": {}, "cron": "0 9 * * 1-5", "chatId": chat_id,
            "prompt": "Describe the radar:", "provider": "claude"}))["schedule"]
        await app.request("schedules/runNow", {"id": schedule["id"]}, timeout=60)
        with anyio.fail_after(scaled(30)):
            await app.wait_notification("chat/event", lambda p: p["chatId"] == chat_id
                                        and p["event"]["kind"] == "messageCompleted")
        await send(app, chat_id, "and the one before?", provider="claude")  # later turns see it too
        first, later = models.requests
    finally:
        models.stop()
    for request in (first, later):
        posted = request.body["messages"][0]
        text, image = posted["content"]
        assert posted["role"] == "user" and text["text"].startswith("Describe the radar:")
        assert PICTURE_NAMED in text["text"]
        assert image["type"] == "image" and base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
