"""A tool result's sound on the wire: OpenAI's ``input_audio`` parts (wav or mp3) after the results
when the provider's config.audio says the model takes audio, a note otherwise; Anthropic's API
takes no audio, so its model is told so. A "+" palette run's media goes beside its user message."""

from __future__ import annotations

import pytest

from sidecar.chat import audio, context
from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.base import (
    NO_AUDIO,
    NO_AUDIO_API,
    AudioPart,
    ChatMessage,
    ImagePart,
    ToolCallRequest,
    TurnRequest,
)
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.remote import Endpoint
from sidecar.client import SidecarClient
from sidecar.store.tool_calls import ToolCallRow
from tests.providers.server import Reply, StreamServer, events
from tests.providers.support import KEY, WEATHER, Build, run

pytestmark = pytest.mark.anyio

WAV = AudioPart("wav", "UklGRjAwMDBXQVZF")
PNG = ImagePart("image/png", "iVBORw0KGgo=")
BRANCH = [
    ChatMessage("user", "Play the forecast"),
    ChatMessage("assistant", "", tool_calls=[ToolCallRequest("call_1", "get_weather", {})]),
    ChatMessage("tool", "[audio 1: audio/wav, given to you after this result]", tool_call_id="call_1", audio=[WAV]),
    ChatMessage("user", "[The user ran the tool radar]\n[image 1: image/png, given to you after this result]",
                images=[PNG]),
]


async def sent(server: StreamServer, provider: object, stream: str) -> list[dict]:
    server.queue(Reply(events=events(stream)))
    _, error = await run(provider, TurnRequest("m", BRANCH, [WEATHER]))
    assert error is None
    return server.requests[-1].body["messages"]


async def test_openai_sends_the_sound_as_input_audio_when_the_model_takes_audio(server: StreamServer, built: Build):
    listener = built(OpenAIProvider, Endpoint("o", server.url + "/v1", KEY, vision=True, audio=True))
    _user, _assistant, result, heard, palette = await sent(server, listener, "openai_text.sse")
    assert result == {"role": "tool", "tool_call_id": "call_1", "content": BRANCH[2].content}
    assert heard == {"role": "user", "content": [
        {"type": "text", "text": "What the tool call call_1 returned:"},
        {"type": "input_audio", "input_audio": {"data": WAV.data, "format": "wav"}}]}
    assert palette == {"role": "user", "content": [
        {"type": "text", "text": BRANCH[3].content},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG.data}"}}]}

    # Without config.audio (the default): no audio part, which a model without audio would refuse.
    deaf = built(OpenAIProvider, Endpoint("d", server.url + "/v1", KEY, vision=True))
    messages = await sent(server, deaf, "openai_text.sse")
    assert len(messages) == 4 and messages[2]["content"] == f"{BRANCH[2].content}\n{NO_AUDIO}"
    assert "input_audio" not in str(messages)


async def test_anthropic_is_told_its_api_takes_no_audio_and_gets_a_palette_runs_picture(
        server: StreamServer, built: Build):
    provider = built(AnthropicProvider, Endpoint("a", server.url, KEY, audio=True))
    _user, _assistant, results = await sent(server, provider, "anthropic_text.sse")
    # The tool result and the palette run's text and picture: one user message, as the API wants.
    result, palette, picture = results["content"]
    assert result == {"type": "tool_result", "tool_use_id": "call_1", "content": f"{BRANCH[2].content}\n{NO_AUDIO_API}"}
    assert palette == {"type": "text", "text": BRANCH[3].content}
    assert picture == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.data}}


async def test_sound_a_model_is_not_given_is_named_in_the_text_with_why():
    big = "A" * (8 * 1024 * 1024)  # 6 MB decoded
    row = ToolCallRow(id="c", tool_id="t", chat_id=None, args={}, status="success", started_at="", result={"content": [
        {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
        {"type": "audio", "mimeType": "audio/ogg", "data": "T2dnUw=="},
        {"type": "audio", "mimeType": "audio/mpeg", "data": big}]})
    text = context.result_text(row, images_follow=True)
    assert text.splitlines() == [
        "[audio 1: audio/wav, given to you after this result]",
        "[audio audio/ogg: not given to the model (a model takes wav or mp3 only)]",
        "[audio audio/mpeg: not given to the model: 6.0 MB is over the 5 MB a model is given]"]
    assert audio.of(row.result) == [AudioPart("wav", "UklGRg==")]


async def test_config_audio_is_a_yes_or_no(app: SidecarClient):
    bad = await app.request_raw("providers/set", {"id": "x", "kind": "openai", "config": {"audio": "yes"}})
    assert bad["error"]["data"]["path"] == "params.config.audio"
    assert "wav and mp3" in bad["error"]["message"]
    ok = await app.request("providers/set", {"id": "x", "kind": "openai", "config": {"audio": True}})
    assert ok["provider"]["config"] == {"audio": True}
