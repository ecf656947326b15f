"""What each provider puts on the wire: the conversation, tools and tool results in its API's
shapes, checked on the request bodies the local server received (a tool call round trip)."""

from __future__ import annotations

import json

import pytest

from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.base import ChatMessage, TextDelta, ToolCallReady, ToolCallRequest, TurnRequest
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.remote import Endpoint
from tests.providers.server import Reply, StreamServer, events
from tests.providers.support import KEY, WEATHER, Build, run

pytestmark = pytest.mark.anyio

QUESTION = ChatMessage("user", "Weather in Paris and Berlin?")


def answer_with_results(text: str, calls: list[ToolCallRequest]) -> list[ChatMessage]:
    """The branch after the model's calls: its message, a result per call (the last one failed),
    then the user's next words."""
    return [
        QUESTION,
        ChatMessage("assistant", text, tool_calls=calls),
        ChatMessage("tool", "18°C, sunny", tool_call_id=calls[0].id),
        ChatMessage("tool", "the weather service is down", tool_call_id=calls[1].id, is_error=True),
        ChatMessage("user", "Thanks. And tomorrow?"),
    ]


async def first_then_second(server: StreamServer, provider, stream: str, model: str, **extra) -> list[dict]:
    """Ask, take the tool calls it streams, send their results back; the two request bodies."""
    server.queue(Reply(events=events(stream)), Reply(events=events(stream)))
    got, error = await run(provider, TurnRequest(model, [QUESTION], [WEATHER], system="You are terse."))
    assert error is None
    calls = [e.call for e in got if isinstance(e, ToolCallReady)]
    text = "".join(e.text for e in got if isinstance(e, TextDelta))
    request = TurnRequest(model, answer_with_results(text, calls), [WEATHER], system="You are terse.", **extra)
    _, error = await run(provider, request)
    assert error is None
    return [seen.body for seen in server.requests]


async def test_openai_messages_tools_and_tool_results(server: StreamServer, built: Build):
    provider = built(OpenAIProvider, Endpoint("o", server.url + "/v1", KEY))
    first, second = await first_then_second(server, provider, "openai_tool_calls.sse", "gpt-test", max_tokens=256)

    assert first["model"] == "gpt-test" and first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city", "parameters": WEATHER.input_schema}}]
    assert first["messages"] == [{"role": "system", "content": "You are terse."},
                                 {"role": "user", "content": "Weather in Paris and Berlin?"}]
    assert "max_tokens" not in first

    assert second["max_tokens"] == 256
    system, user, assistant, result1, result2, again = second["messages"]
    assert assistant["role"] == "assistant" and assistant["content"] is None  # the stream said no text
    assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]] == [
        ("call_Dn2RJJSxzDm49vlVTehseJ0k", "function", "get_weather", {"city": "Paris", "unit": "c"}),
        ("call_Qx8yT3mVbN7kLp2Rz5Wc1HdA", "function", "get_weather", {"city": "Berlin", "days": [1, 2], "unit": "f"}),
    ]
    assert result1 == {"role": "tool", "tool_call_id": "call_Dn2RJJSxzDm49vlVTehseJ0k", "content": "18°C, sunny"}
    assert result2 == {"role": "tool", "tool_call_id": "call_Qx8yT3mVbN7kLp2Rz5Wc1HdA",
                       "content": "the weather service is down"}
    assert again == {"role": "user", "content": "Thanks. And tomorrow?"}


async def test_openai_sends_back_arguments_that_did_not_parse_as_they_came(server: StreamServer, built: Build):
    provider = built(OpenAIProvider, Endpoint("o", server.url + "/v1", KEY, "gpt-test"))
    server.queue(Reply(events=events("openai_text.sse")))
    bad = ToolCallRequest("call_x", "get_weather", None, '{"city": Paris')
    messages = [QUESTION, ChatMessage("assistant", "", tool_calls=[bad]),
                ChatMessage("tool", "arguments are not JSON", tool_call_id="call_x", is_error=True)]
    await run(provider, TurnRequest(None, messages, []))
    body = server.requests[0].body
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"city": Paris'
    assert "tools" not in body


async def test_anthropic_messages_tools_and_tool_results(server: StreamServer, built: Build):
    provider = built(AnthropicProvider, Endpoint("a", server.url, KEY))
    first, second = await first_then_second(server, provider, "anthropic_tool_calls.sse", "claude-test")

    assert first["model"] == "claude-test" and first["stream"] is True
    assert first["max_tokens"] == 4096  # the API requires one; the turn gave none
    assert first["system"] == "You are terse."
    assert first["tools"] == [{"name": "get_weather", "description": "The weather in a city",
                               "input_schema": WEATHER.input_schema}]
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Berlin?"}]}]

    assert second["system"] == "You are terse."
    user, assistant, results = second["messages"]
    assert assistant == {"role": "assistant", "content": [
        {"type": "text", "text": "I'll check both cities."},
        {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
         "input": {"city": "Paris", "unit": "c"}},
        {"type": "tool_use", "id": "toolu_01Qx8yT3mVbN7kLp2Rz5WcHd", "name": "get_weather",
         "input": {"city": "Berlin", "days": [1, 2], "unit": "f"}},
    ]}
    # Both results in the one user message after the calls, then what the user said next.
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": "18°C, sunny"},
        {"type": "tool_result", "tool_use_id": "toolu_01Qx8yT3mVbN7kLp2Rz5WcHd",
         "content": "the weather service is down", "is_error": True},
        {"type": "text", "text": "Thanks. And tomorrow?"},
    ]}


async def test_anthropic_takes_system_messages_and_the_turns_token_limit(server: StreamServer, built: Build):
    provider = built(AnthropicProvider, Endpoint("a", server.url, KEY, "claude-test"))
    server.queue(Reply(events=events("anthropic_text.sse")))
    messages = [ChatMessage("system", "Answer in French."), QUESTION]
    await run(provider, TurnRequest(None, messages, [], system="You are terse.", max_tokens=100))
    body = server.requests[0].body
    assert body["system"] == "You are terse.\n\nAnswer in French."
    assert body["max_tokens"] == 100 and body["model"] == "claude-test" and "tools" not in body
    assert [m["role"] for m in body["messages"]] == ["user"]
