"""A provider's cap on tools per request (issue 28): OpenAI's 128 unless its config says another,
never exceeded by a turn whatever the user enabled and pinned, checked on the request body the
local server received."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.remote import Endpoint
from sidecar.client import RemoteError, SidecarClient
from tests.chat.test_offer import many_tools
from tests.providers.server import Reply, StreamServer, events
from tests.providers.support import KEY

pytestmark = pytest.mark.anyio


def test_each_kind_has_its_limits_and_config_overrides_them():
    openai = OpenAIProvider(Endpoint.of("o", None, KEY, None, {}, {}))
    assert (openai.tool_limits.max_tools, openai.tool_limits.context_window, openai.tool_limits.tool_search) == \
        (128, 128_000, None)
    said = OpenAIProvider(Endpoint.of("o", "http://x", KEY, None, {"maxTools": 40, "contextWindow": 32_000}, {}))
    assert (said.tool_limits.max_tools, said.tool_limits.context_window) == (40, 32_000)
    claude = AnthropicProvider(Endpoint.of("a", None, KEY, None, {}, {}))
    assert (claude.tool_limits.max_tools, claude.tool_limits.tool_search) == (None, "bm25")
    # A compatible server behind a base URL has no tool search unless the config says so.
    assert AnthropicProvider(Endpoint.of("a", "http://x", KEY, None, {}, {})).tool_limits.tool_search is None
    off = AnthropicProvider(Endpoint.of("a", None, KEY, None, {"toolSearch": False}, {}))
    assert off.tool_limits.tool_search is None


@pytest.mark.parametrize(("kind", "config"), [
    ("openai", {"toolSearch": "bm25"}), ("anthropic", {"toolSearch": "fuzzy"}), ("openai", {"maxTools": 0}),
    ("openai", {"maxTools": True}), ("anthropic", {"contextWindow": 10}), ("openai", {"contextWindow": "big"})])
async def test_bad_limits_are_refused(app: SidecarClient, kind: str, config: dict):
    with pytest.raises(RemoteError) as caught:
        await app.request("providers/set", {"id": "p", "kind": kind, "apiKey": KEY, "config": config})
    assert caught.value.code == -32602 and caught.value.data["path"].startswith("params.config.")


async def test_an_openai_turn_never_sends_more_than_128_tools(data_dir: Path, server: StreamServer):
    server.queue(Reply(events=events("openai_text.sse")))
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
        ids = await many_tools(sc, 150)
        await sc.request("providers/set", {"id": "gpt", "kind": "openai", "baseUrl": server.url + "/v1",
                                           "apiKey": KEY, "defaultModel": "gpt-test"})
        await sc.request("settings/set", {"toolSelection": "all", "pinnedTools": ids[:140]})
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        sent = await sc.request("chat/send", {"chatId": chat, "content": "hi", "provider": "gpt"})
        assert sent["stopReason"] == "endTurn"
        (offered,) = [n["params"]["event"] for n in sc.notifications if n["method"] == "chat/event"
                      and n["params"]["event"]["kind"] == "toolsOffered"]
    names = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert len(names) == 128 and names[-1] == "find_tools"
    assert offered["reason"] == "cap" and len(offered["toolIds"]) == 127
    assert offered["toolIds"] == ids[:127]  # the pinned first, in the order pinned
