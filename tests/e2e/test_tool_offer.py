"""The tools a turn offers, in the real process (issue 28): 150 tools over the budget, find_tools
loading more within the turn, and the settings and the stored choice still there after a restart
(a replay on a new branch offers what the original turn was offered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.chat.offer import FIND_TOOLS
from sidecar.client import SidecarClient
from tests.chat.test_offer import echoed, many_tools, offers, scripted, turn

pytestmark = pytest.mark.anyio


async def test_a_big_catalog_is_selected_found_and_replayed_after_a_restart(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as sc:
        ids = await many_tools(sc, 150)
        await sc.request("settings/set", {"pinnedTools": [ids[-1]], "relevantTools": 4})
        await scripted(sc, {"toolCalls": [{"tool": FIND_TOOLS, "args": {"query": "translate text"}}]},
                       {"echoTools": True})
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        sent, evs = await turn(sc, chat, "send an email to Ada")
        first, second = offers(evs)
        assert first["reason"] == "budget" and first["findTools"] and first["toolIds"][0] == ids[-1]
        assert [i for i in first["toolIds"] if i in ids][1:] == [i for i in first["toolIds"]
                                                                 if "send" in i][:4]
        loaded = [i for i in second["toolIds"] if i not in first["toolIds"]]
        assert loaded and all("translate" in i for i in loaded)
        assert len(echoed(evs)) == len(second["toolIds"]) + 1
    assert sc.proc.returncode == 0

    async with SidecarClient.spawn(data_dir) as sc:
        settings = (await sc.request("settings/get"))["settings"]
        assert settings["pinnedTools"] == [ids[-1]] and settings["relevantTools"] == 4
        await scripted(sc, {"echoTools": True})
        again, evs = await turn(sc, chat, "send an email to Ada", parentId=None, toolsFrom=sent["messageId"])
        (replayed,) = offers(evs)
        assert replayed["reason"] == "replay" and replayed["toolIds"] == first["toolIds"]
        got = await sc.request("chats/get", {"id": chat})
        by_id = {m["id"]: m for m in got["messages"]}
        assert [o["reason"] for o in by_id[sent["messageId"]]["toolsOffered"]] == ["budget", "found"]
        assert by_id[again["messageId"]]["parentId"] == again["userMessageId"]
    assert sc.proc.returncode == 0
