"""The APIs' own deferred loading (issue 28), Anthropic's tool search and OpenAI's hosted
tool_search (Responses API): tools sent with ``defer_loading`` beside the API's
search tool, the search's blocks read from the stream (a stream in the API's wire format,
served locally) and given back in the next call, and a chat turn over its budget that lets the
API's search load a tool and then calls it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.base import (
    ChatMessage,
    Finished,
    NativeBlock,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    TurnRequest,
    Usage,
)
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.remote import Endpoint
from sidecar.client import SidecarClient
from tests.providers.server import Reply, StreamServer, events
from tests.providers.support import KEY, WEATHER, Build, run

pytestmark = pytest.mark.anyio

LIST_FILES = ToolSpec("list_files", "List the files in the workspace", {"type": "object"}, deferred=True)


async def test_deferred_tools_go_with_the_search_tool_and_its_blocks_come_back(server: StreamServer, built: Build):
    provider = built(AnthropicProvider, Endpoint("a", server.url, KEY, "claude-test", tool_search="bm25"))
    assert provider.tool_limits.tool_search == "bm25"
    server.queue(Reply(events=events("anthropic_tool_search.sse")), Reply(events=events("anthropic_text.sse")))
    question = ChatMessage("user", "What files are there?")
    got, error = await run(provider, TurnRequest(None, [question], [WEATHER, LIST_FILES]))
    assert error is None

    first = server.requests[0].body
    assert first["tools"] == [
        {"name": "get_weather", "description": "The weather in a city", "input_schema": WEATHER.input_schema},
        {"name": "list_files", "description": "List the files in the workspace", "input_schema": {"type": "object"},
         "defer_loading": True},
        {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}]

    native = [e for e in got if isinstance(e, NativeBlock)]
    assert [b.block["type"] for b in native] == ["server_tool_use", "tool_search_tool_result"]
    assert native[0].block["input"] == {"query": "list files workspace"} and "caller" not in native[0].block
    assert native[1].loaded == ("list_files",)
    (call,) = [e.call for e in got if isinstance(e, ToolCallReady)]  # the search's query is no call of ours
    assert (call.name, call.arguments) == ("list_files", {})

    text = "".join(e.text for e in got if isinstance(e, TextDelta))
    history = [question, ChatMessage("assistant", text, tool_calls=[call], native=[b.block for b in native]),
               ChatMessage("tool", "a.txt", tool_call_id=call.id)]
    _, error = await run(provider, TurnRequest(None, history, [WEATHER, LIST_FILES]))
    assert error is None
    assistant = server.requests[1].body["messages"][1]
    assert [b["type"] for b in assistant["content"]] == [
        "server_tool_use", "tool_search_tool_result", "text", "tool_use"]
    assert assistant["content"][1]["content"]["tool_references"] == [{"type": "tool_reference",
                                                                      "tool_name": "list_files"}]


async def test_without_deferred_tools_no_search_tool_is_sent(server: StreamServer, built: Build):
    provider = built(AnthropicProvider, Endpoint("a", server.url, KEY, "claude-test", tool_search="regex"))
    server.queue(Reply(events=events("anthropic_text.sse")))
    _, error = await run(provider, TurnRequest(None, [ChatMessage("user", "hi")], [WEATHER]))
    assert error is None
    assert [t["name"] for t in server.requests[0].body["tools"]] == ["get_weather"]


async def test_a_turn_over_its_budget_lets_the_apis_search_load_a_tool_and_calls_it(
        data_dir: Path, server: StreamServer):
    server.queue(Reply(events=events("anthropic_tool_search.sse")), Reply(events=events("anthropic_text.sse")))
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
        await sc.request("providers/set", {"id": "claude", "kind": "anthropic", "baseUrl": server.url,
                                           "apiKey": KEY, "defaultModel": "claude-test",
                                           "config": {"toolSearch": "bm25"}})
        # Nothing kept, nothing ranked: every tool is deferred, the API's search finds list_files.
        await sc.request("settings/set", {"toolSelection": "relevant", "keepBuiltins": False, "relevantTools": 0})
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        sent = await sc.request("chat/send", {"chatId": chat, "content": "What files are there?",
                                              "provider": "claude"})
        assert sent["stopReason"] == "endTurn"
        evs = [n["params"]["event"] for n in sc.notifications
               if n["method"] == "chat/event" and n["params"]["messageId"] == sent["messageId"]]
    first, second = [e for e in evs if e["kind"] == "toolsOffered"]
    assert first["toolIds"] == [] and first["deferred"] >= 4 and first["reason"] == "relevant"
    assert not first.get("findTools")
    assert second["toolIds"] == ["list_files"] and second["deferred"] == first["deferred"] - 1
    assert second["reason"] == "found"
    (finished,) = [e["toolCall"] for e in evs if e["kind"] == "toolCallFinished"]
    assert (finished["toolId"], finished["status"]) == ("list_files", "success")

    body1, body2 = (seen.body for seen in server.requests)
    assert all(t.get("defer_loading") for t in body1["tools"][:-1])
    assert body1["tools"][-1]["name"] == "tool_search_tool_bm25"
    listed = next(t for t in body2["tools"] if t.get("name") == "list_files")
    assert "defer_loading" not in listed  # loaded: given whole from then on
    assert json.dumps(body2["messages"][1]["content"][0]).count("srvtoolu_01Vd3kqCjf8ZrWm4TnXo9pLb") == 1


async def test_openais_responses_api_sends_deferred_tools_with_its_hosted_search(server: StreamServer, built: Build):
    provider = built(OpenAIProvider, Endpoint("o", server.url + "/v1", KEY, "gpt-test", api="responses"))
    assert provider.tool_limits.tool_search == "hosted" and provider.tool_limits.max_tools == 128
    server.queue(Reply(events=events("openai_responses_tool_search.sse")),
                 Reply(events=events("openai_responses_text.sse")))
    question = ChatMessage("user", "What files are there?")
    got, error = await run(provider, TurnRequest(None, [question], [WEATHER, LIST_FILES], system="Be brief."))
    assert error is None
    seen = server.requests[0]
    assert seen.path == "/v1/responses"
    assert seen.body["instructions"] == "Be brief." and seen.body["store"] is False
    assert seen.body["input"] == [{"role": "user", "content": "What files are there?"}]
    assert seen.body["tools"] == [
        {"type": "function", "name": "get_weather", "description": "The weather in a city",
         "parameters": WEATHER.input_schema},
        {"type": "function", "name": "list_files", "description": "List the files in the workspace",
         "parameters": {"type": "object"}, "defer_loading": True},
        {"type": "tool_search"}]
    native = [e for e in got if isinstance(e, NativeBlock)]
    assert [b.block["type"] for b in native] == ["tool_search_call", "tool_search_output"]
    assert native[1].loaded == ("list_files",)
    (call,) = [e.call for e in got if isinstance(e, ToolCallReady)]
    assert (call.id, call.name, call.arguments) == ("call_Qm3ZrT8vWk2LpN5xYb7cHd1F", "list_files", {})
    assert got[-2:] == [Usage(318, 41), Finished("tool_use", "gpt-5.4-2026-03-05")]

    history = [question, ChatMessage("assistant", "", tool_calls=[call], native=[b.block for b in native]),
               ChatMessage("tool", "a.txt", tool_call_id=call.id)]
    got, error = await run(provider, TurnRequest(None, history, [WEATHER, LIST_FILES]))
    assert error is None and "".join(e.text for e in got if isinstance(e, TextDelta)) == "One file: a.txt."
    assert got[-1] == Finished("end_turn", "gpt-5.4-2026-03-05")
    sent = server.requests[1].body["input"]
    assert [i.get("type", i.get("role")) for i in sent] == [
        "user", "tool_search_call", "tool_search_output", "function_call", "function_call_output"]
    assert sent[3] == {"type": "function_call", "call_id": call.id, "name": "list_files", "arguments": "{}"}
    assert sent[4] == {"type": "function_call_output", "call_id": call.id, "output": "a.txt"}


async def test_chat_completions_never_defers_whatever_the_config_says(built: Build):
    provider = built(OpenAIProvider, Endpoint.of("o", None, KEY, None, {"toolSearch": "hosted"}, {}))
    assert provider.tool_limits.tool_search is None
