"""A tool result's pictures on the wire: image blocks in Anthropic's tool_result, a user message
of image_url parts after the results for OpenAI, and a note instead when the model takes none."""

from __future__ import annotations

import pytest

from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.base import NO_VISION, ChatMessage, ImagePart, ToolCallRequest, TurnRequest
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.remote import Endpoint
from tests.providers.server import Reply, StreamServer, events
from tests.providers.support import KEY, WEATHER, Build, run

pytestmark = pytest.mark.anyio

PNG = ImagePart("image/png", "iVBORw0KGgo=")
CALLS = [ToolCallRequest("call_1", "get_weather", {"city": "Paris"}), ToolCallRequest("call_2", "get_weather", {})]
BRANCH = [
    ChatMessage("user", "Show me the radar"),
    ChatMessage("assistant", "", tool_calls=CALLS),
    ChatMessage("tool", "radar [image 1: image/png]", tool_call_id="call_1", images=[PNG]),
    ChatMessage("tool", "no radar", tool_call_id="call_2"),
    ChatMessage("user", "And now?"),
]


async def sent(server: StreamServer, provider: object, stream: str) -> dict:
    server.queue(Reply(events=events(stream)))
    _, error = await run(provider, TurnRequest("m", BRANCH, [WEATHER]))
    assert error is None
    return server.requests[-1].body


async def test_anthropic_puts_the_picture_in_the_tool_result(server: StreamServer, built: Build):
    body = await sent(server, built(AnthropicProvider, Endpoint("a", server.url, KEY)), "anthropic_text.sse")
    results = body["messages"][2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "call_1", "content": [
        {"type": "text", "text": "radar [image 1: image/png]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.data}}]}
    assert results[1] == {"type": "tool_result", "tool_use_id": "call_2", "content": "no radar"}

    blind = built(AnthropicProvider, Endpoint("b", server.url, KEY, vision=False))
    results = (await sent(server, blind, "anthropic_text.sse"))["messages"][2]["content"]
    assert results[0]["content"] == f"radar [image 1: image/png]\n{NO_VISION}"


async def test_openai_sends_the_pictures_after_the_results_as_a_user_message(server: StreamServer, built: Build):
    # An OpenAI-compatible server is taken to be without vision unless its config says so.
    provider = built(OpenAIProvider, Endpoint("o", server.url + "/v1", KEY, vision=True))
    _user, _assistant, first, second, pictures, again = (await sent(server, provider, "openai_text.sse"))["messages"]
    assert first == {"role": "tool", "tool_call_id": "call_1", "content": "radar [image 1: image/png]"}
    assert second["tool_call_id"] == "call_2"
    assert pictures == {"role": "user", "content": [
        {"type": "text", "text": "What the tool call call_1 returned:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG.data}"}}]}
    assert again == {"role": "user", "content": "And now?"}

    local = built(OpenAIProvider, Endpoint("l", server.url + "/v1", KEY))
    messages = (await sent(server, local, "openai_text.sse"))["messages"]
    assert len(messages) == 5 and messages[2]["content"] == f"radar [image 1: image/png]\n{NO_VISION}"
