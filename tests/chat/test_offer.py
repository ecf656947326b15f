"""Which tools a chat turn offers (issue 28), through the app's wire on the scripted provider: 150
HTTP tools plus the built-ins, the budget, find_tools, the provider's cap, pinned and disabled
tools, a tool named though not offered, the stored choice replayed on another branch, and the
settings' bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sidecar.chat.offer import FIND_LIMIT, FIND_TOOLS, MAX_FIND_CALLS, SELECTED_TOKENS
from sidecar.client import RemoteError, SidecarClient

pytestmark = pytest.mark.anyio

TOPICS = ["weather forecast for a city", "stock quote for a ticker symbol", "currency exchange rate",
          "translate text between languages", "send an email message", "calendar events of a day",
          "git commit history of a repository", "search flights between airports", "convert units of measure",
          "look up a word in the dictionary", "news headlines of a country", "restaurant reviews nearby",
          "shipping status of a parcel", "time zone of a place", "population of a country"]


async def many_tools(sc: SidecarClient, n: int = 150) -> list[str]:
    """``n`` HTTP tools in a user toolset (never called: their host is unreachable), ``n / 15`` per topic."""
    await sc.request("toolsets/create", {"id": "many", "name": "Many"})
    ids = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        definition = {"description": f"{topic.capitalize()} (variant {i})",
                      "inputSchema": {"type": "object", "properties": {"q": {"type": "string",
                                                                             "description": "What to look up"}}},
                      "http": {"urlTemplate": "http://127.0.0.1:9/x", "allowedHosts": ["127.0.0.1"]}}
        slug = f"{topic.split()[0]}-{topic.split()[1]}-{i}"
        tool = (await sc.request("tools/put", {"toolsetId": "many", "slug": slug, "version": "1",
                                               "definition": definition}))["tool"]
        ids.append(tool["id"])
    return ids


async def scripted(sc: SidecarClient, *script: dict[str, Any], **config: Any) -> str:
    await sc.request("providers/set", {"id": "s", "kind": "scripted", "config": {"script": list(script), **config}})
    return "s"


async def turn(sc: SidecarClient, chat: str, content: str, **extra: Any) -> tuple[dict[str, Any], list[dict]]:
    sent = await sc.request("chat/send", {"chatId": chat, "content": content, "provider": "s", **extra})
    evs = [n["params"]["event"] for n in sc.notifications
           if n["method"] == "chat/event" and n["params"]["messageId"] == sent["messageId"]]
    return sent, evs


def offers(evs: list[dict]) -> list[dict]:
    return [e for e in evs if e["kind"] == "toolsOffered"]


def echoed(evs: list[dict]) -> list[str]:
    """What the scripted model said it was given (echoTools), the last such reply of the turn."""
    text = "".join(e["text"] for e in evs if e["kind"] == "textDelta")
    return json.loads(text[text.index("["):])


async def new_chat(sc: SidecarClient) -> str:
    return (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]


async def enabled_ids(sc: SidecarClient) -> list[str]:
    tools = (await sc.request("tools/list", {"pageSize": 500}))["tools"]
    return [t["id"] for t in tools if t["enabled"]]


async def test_below_the_budget_the_model_gets_every_tool(app: SidecarClient):
    await scripted(app, {"echoTools": True})
    chat = await new_chat(app)
    _, evs = await turn(app, chat, "hello")
    (offered,) = offers(evs)
    assert offered["reason"] == "all" and not offered.get("findTools") and offered.get("deferred", 0) == 0
    assert sorted(offered["toolIds"]) == sorted(await enabled_ids(app))
    assert len(echoed(evs)) == len(offered["toolIds"]) and FIND_TOOLS not in echoed(evs)
    assert offered["tokens"] > 0


async def test_a_budget_of_zero_selects_even_a_few_tools(app: SidecarClient):
    await app.request("settings/set", {"toolBudgetTokens": 0})
    await scripted(app, {"echoTools": True})
    _, evs = await turn(app, await new_chat(app), "hello")
    (offered,) = offers(evs)
    # Only the built-ins exist: all kept, nothing left to find, so no find_tools either.
    assert offered["reason"] == "budget" and sorted(offered["toolIds"]) == sorted(await enabled_ids(app))


async def test_over_the_budget_the_turn_offers_kept_and_relevant_tools_and_find_tools(app: SidecarClient):
    ids = await many_tools(app)
    builtins = [i for i in await enabled_ids(app) if ":" not in i]
    await scripted(app, {"echoTools": True})
    chat = await new_chat(app)
    _, evs = await turn(app, chat, "What is the stock quote for ACME?")
    (offered,) = offers(evs)
    assert offered["reason"] == "budget" and offered["findTools"] is True
    got = offered["toolIds"]
    assert set(builtins) <= set(got)
    relevant = [i for i in got if i in ids]
    assert len(relevant) == 8  # K
    assert all("stock" in i for i in relevant), relevant
    assert echoed(evs)[-1] == FIND_TOOLS and len(echoed(evs)) == len(got) + 1
    everything = await app.request("chat/send", {"chatId": chat, "content": "x", "provider": "s"})
    assert everything["stopReason"] == "endTurn"

    # The same many tools with selection 'all' go whole, and cost far more tokens.
    await app.request("settings/set", {"toolSelection": "all"})
    await scripted(app, {"echoTools": True})
    _, evs = await turn(app, chat, "What is the stock quote for ACME?")
    (whole,) = offers(evs)
    assert whole["reason"] == "all" and len(whole["toolIds"]) == len(ids) + len(builtins)
    assert whole["tokens"] > 5 * offered["tokens"]


async def test_find_tools_loads_definitions_into_the_next_step(app: SidecarClient):
    await many_tools(app)
    await scripted(app, {"toolCalls": [{"tool": FIND_TOOLS, "args": {"query": "currency exchange rate"}}]},
                   {"echoTools": True})
    chat = await new_chat(app)
    sent, evs = await turn(app, chat, "hello there")
    first, second = offers(evs)
    assert not any("currency" in i for i in first["toolIds"])
    found = [i for i in second["toolIds"] if i not in first["toolIds"]]
    assert second["reason"] == "found" and len(found) == 5 and all("currency" in i for i in found)
    assert len(echoed(evs)) == len(second["toolIds"]) + 1
    # No tool call record for find_tools (no catalog tool); the stored choice has both steps.
    got = await app.request("chats/get", {"id": chat})
    reply = next(m for m in got["messages"] if m["id"] == sent["messageId"])
    assert reply["toolCalls"] == []
    assert [o["toolIds"] for o in reply["toolsOffered"]] == [first["toolIds"], second["toolIds"]]

    # The next turn keeps what this one found.
    await scripted(app, {"echoTools": True})
    _, evs = await turn(app, chat, "thanks")
    assert set(found) <= set(offers(evs)[0]["toolIds"])


async def test_find_tools_asked_for_everything_a_hundred_times_is_bounded(app: SidecarClient):
    await many_tools(app)
    calls = [{"tool": FIND_TOOLS, "args": {"query": t, "limit": 10}} for t in TOPICS]
    calls += [{"tool": FIND_TOOLS, "args": {"query": "everything", "limit": 10}} for _ in range(100)]
    await scripted(app, {"toolCalls": calls}, {"toolCalls": calls}, {"echoTools": True})
    chat = await new_chat(app)
    sent, evs = await turn(app, chat, "give me all", maxTurns=3)
    assert sent["stopReason"] == "endTurn"
    first, second, third = offers(evs)
    # The first five asks each loaded ten; the other 110 were told the limit.
    assert len(second["toolIds"]) == len(first["toolIds"]) + MAX_FIND_CALLS * FIND_LIMIT
    assert len(third["toolIds"]) == len(second["toolIds"])  # the second step's 115 asks loaded nothing
    got = await app.request("chats/get", {"id": chat})
    assert len(got["messages"]) == 2


async def test_the_providers_cap_is_never_exceeded(app: SidecarClient):
    ids = await many_tools(app, 60)
    # More pinned than the cap takes: the cap wins.
    await app.request("settings/set", {"toolSelection": "all", "pinnedTools": ids[:30]})
    await scripted(app, {"toolCalls": [{"tool": FIND_TOOLS, "args": {"query": "weather", "limit": 10}}]},
                   {"echoTools": True}, maxTools=20)
    _, evs = await turn(app, await new_chat(app), "weather please")
    first, second = offers(evs)
    assert first["reason"] == "cap" and first["findTools"] is True
    assert len(first["toolIds"]) + 1 <= 20 and len(second["toolIds"]) + 1 <= 20
    assert len(echoed(evs)) <= 20


async def test_pinned_tools_are_offered_but_not_missing_or_disabled_ones(app: SidecarClient):
    ids = await many_tools(app, 60)
    pinned, disabled = ids[1], ids[2]  # "stock ..." and "currency ...": nothing to do with the question
    await app.request("tools/setOverride", {"toolsetId": "many", "toolId": disabled, "enabled": False})
    bad = await app.request("settings/set", {"pinnedTools": [pinned, "nowhere:nothing", disabled]})
    assert bad["settings"]["pinnedTools"] == [pinned, "nowhere:nothing", disabled]
    await scripted(app, {"echoTools": True})
    _, evs = await turn(app, await new_chat(app), "weather in Paris")
    (offered,) = offers(evs)
    assert offered["toolIds"][0] == pinned
    assert "nowhere:nothing" not in offered["toolIds"] and disabled not in offered["toolIds"]


async def test_a_tool_named_but_not_offered_runs_and_a_disabled_one_does_not(app: SidecarClient):
    ids = await many_tools(app, 60)
    await app.request("tools/setOverride", {"toolsetId": "many", "toolId": ids[0], "enabled": False})
    await app.request("settings/set", {"toolSelection": "relevant", "keepBuiltins": False, "relevantTools": 1})
    await scripted(app, {"toolCalls": [{"tool": "list_files", "args": {}}, {"tool": ids[0], "args": {"q": "x"}},
                                       {"tool": "no_such_tool", "args": {}}]}, {"echoTools": True})
    chat = await new_chat(app)
    _, evs = await turn(app, chat, "stock quote")
    first, second = offers(evs)
    assert "list_files" not in first["toolIds"]
    finished = [e["toolCall"] for e in evs if e["kind"] == "toolCallFinished"]
    assert [(c["toolId"], c["status"], c.get("errorKind")) for c in finished] == [
        ("list_files", "success", None), (ids[0], "error", "unknown_tool"), ("no_such_tool", "error", "unknown_tool")]
    assert "list_files" in second["toolIds"] and second["reason"] == "named"


async def test_the_stored_choice_replays_on_another_branch(app: SidecarClient):
    await many_tools(app, 60)
    await scripted(app, {"echoTools": True}, {"echoTools": True})
    chat = await new_chat(app)
    sent, evs = await turn(app, chat, "weather in Paris")
    (original,) = offers(evs)
    # Other settings now: a fresh choice would differ, a replay does not.
    await app.request("settings/set", {"toolSelection": "all"})
    again, evs = await turn(app, chat, "weather in Paris", parentId=None, toolsFrom=sent["messageId"])
    (replayed,) = offers(evs)
    assert replayed["reason"] == "replay" and replayed["toolIds"] == original["toolIds"]
    assert len(echoed(evs)) == len(original["toolIds"]) + 1  # and find_tools, as the original had
    got = await app.request("chats/get", {"id": chat})
    stored = {m["id"]: m.get("toolsOffered") for m in got["messages"]}
    assert stored[again["messageId"]][0]["toolIds"] == original["toolIds"]

    with pytest.raises(RemoteError) as caught:  # a user message has no offer to replay
        await app.request("chat/send", {"chatId": chat, "content": "x", "provider": "s",
                                        "toolsFrom": sent["userMessageId"]})
    assert caught.value.code == -32602 and caught.value.data["path"] == "params.toolsFrom"


async def test_a_chats_own_settings_override_the_users(app: SidecarClient):
    await many_tools(app, 60)
    await scripted(app, {"echoTools": True}, {"echoTools": True})
    mine, other = await new_chat(app), await new_chat(app)
    updated = (await app.request("chats/update", {"id": mine, "title": "mine",
                                                  "toolSettings": {"toolSelection": "all"}}))["chat"]
    assert updated["title"] == "mine" and updated["toolSettings"] == {"toolSelection": "all"}
    _, evs = await turn(app, mine, "weather")
    assert offers(evs)[0]["reason"] == "all"
    _, evs = await turn(app, other, "weather")
    assert offers(evs)[0]["reason"] == "budget"
    back = (await app.request("chats/update", {"id": mine, "toolSettings": {}}))["chat"]
    assert "toolSettings" not in back and back["title"] == "mine"
    with pytest.raises(RemoteError) as caught:
        await app.request("chats/update", {"id": "no-such-chat", "title": "x"})
    assert caught.value.code == -32010
    with pytest.raises(RemoteError) as caught:
        await app.request("chats/update", {"id": mine, "title": "x" * 1001})
    assert caught.value.code == -32602
    assert (await app.request("chats/get", {"id": mine}))["chat"]["title"] == "mine"


@pytest.mark.parametrize("params", [{"relevantTools": 1000}, {"toolBudgetTokens": -1}, {"toolSelection": "some"},
                                    {"pinnedTools": [""]}, {"pinnedTools": ["x"] * 257}])
async def test_bad_settings_are_refused_and_change_nothing(app: SidecarClient, params: dict[str, Any]):
    before = (await app.request("settings/get"))["settings"]
    with pytest.raises(RemoteError) as caught:
        await app.request("settings/set", params)
    assert caught.value.code == -32602
    with pytest.raises(RemoteError):
        await app.request("chats/update", {"id": await new_chat(app), "toolSettings": params})
    assert (await app.request("settings/get"))["settings"] == before


async def test_settings_are_kept_and_announced(app: SidecarClient):
    got = await app.request("settings/set", {"toolSelection": "relevant", "relevantTools": 3,
                                             "pinnedTools": ["write_file"]})
    assert got["settings"]["toolSelection"] == "relevant" and got["settings"]["relevantTools"] == 3
    changed = [n["params"] for n in app.notifications if n["method"] == "settings/changed"]
    assert sorted(changed[-1]["changed"]) == ["pinnedTools", "relevantTools", "toolSelection"]
    assert (await app.request("settings/get"))["settings"]["pinnedTools"] == ["write_file"]


async def test_with_tools_switched_off_the_turn_says_none_were_offered(app: SidecarClient):
    await app.request("settings/set", {"toolsEnabled": False})
    await scripted(app, {"echoTools": True})
    _, evs = await turn(app, await new_chat(app), "hello")
    (offered,) = offers(evs)
    assert offered["reason"] == "toolsOff" and offered.get("toolIds", []) == [] and echoed(evs) == []


async def test_what_the_branch_attached_is_kept_even_switched_off_globally(app: SidecarClient):
    await many_tools(app, 60)
    await app.request("toolsets/create", {"id": "few", "name": "Few"})
    few = []
    for slug in ("alpha", "beta"):
        definition = {"description": f"The {slug} tool", "inputSchema": {"type": "object"},
                      "http": {"urlTemplate": "http://127.0.0.1:9/x", "allowedHosts": ["127.0.0.1"]}}
        few.append((await app.request("tools/put", {"toolsetId": "few", "slug": slug, "version": "1",
                                                    "definition": definition}))["tool"]["id"])
    await app.request("toolsets/setEnabled", {"id": "few", "enabled": False})
    await scripted(app, {"echoTools": True}, {"echoTools": True})
    chat = await new_chat(app)
    _, evs = await turn(app, chat, "weather please")
    assert not set(few) & set(offers(evs)[0]["toolIds"])  # off, and not attached
    _, evs = await turn(app, chat, "weather please", attachments=[{"kind": "toolset", "id": "few"}])
    (offered,) = offers(evs)
    assert offered["reason"] == "budget" and set(few) <= set(offered["toolIds"])


async def test_ranked_tools_join_while_the_offer_fits_its_token_allowance(app: SidecarClient):
    """Long real-world descriptions: eight ranked tools of ~300 tokens each would more than double
    the offer; the best ones join while the whole fits SELECTED_TOKENS, the best one always."""
    await app.request("toolsets/create", {"id": "wordy", "name": "Wordy"})
    for i in range(60):
        definition = {"description": f"Weather forecast for a city, variant {i}. " + "Details of the forecast. " * 48,
                      "http": {"urlTemplate": "http://127.0.0.1:9/x", "allowedHosts": ["127.0.0.1"]}}
        await app.request("tools/put", {"toolsetId": "wordy", "slug": f"forecast-{i}", "version": "1",
                                        "definition": definition})
    await scripted(app, {"text": "ok"})
    _, evs = await turn(app, await new_chat(app), "what's the weather forecast for Lisbon?")
    (offered,) = offers(evs)
    ranked = [t for t in offered["toolIds"] if t.startswith("wordy:")]
    assert offered["reason"] == "budget" and offered["findTools"] and 1 <= len(ranked) < 8
    assert offered["tokens"] <= SELECTED_TOKENS
    await app.request("settings/set", {"toolBudgetTokens": 10})  # a budget smaller than any tool: the best still joins
    _, evs = await turn(app, await new_chat(app), "what's the weather forecast for Lisbon?")
    (offered,) = offers(evs)
    assert len([t for t in offered["toolIds"] if t.startswith("wordy:")]) == 1
