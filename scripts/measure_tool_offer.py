#!/usr/bin/env python3
"""Tokens of tool definitions a chat turn sends, ``toolSelection: all`` against ``auto`` (issue 28),
over a catalog of N HTTP tools (default 500) plus the built-ins, in one real sidecar process.

    .venv/bin/python scripts/measure_tool_offer.py [--tools 500]

The tools are generated, sized like real MCP tools (the seven servers of issue 28 average ~150
tokens a definition: a description of two or three sentences, three described parameters); the
figure is the sidecar's own estimate of what it sent (``toolsOffered.tokens``: the JSON of each
definition at 4 characters a token), and beside it how many tools the scripted provider says it
received (``echoTools``). A token count, not a timing: nothing here is judged
against the clock. Budget (issue 28): <= 2,000 tokens a turn in ``auto`` at 500 tools.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.client import SidecarClient  # noqa: E402

DOMAINS = ["weather", "stocks", "currency", "translation", "email", "calendar", "git", "flights", "units",
           "dictionary", "news", "restaurants", "parcels", "time zones", "population", "files", "notes",
           "tickets", "invoices", "contacts"]
ACTIONS = ["get", "list", "search", "create", "update", "delete", "summarize", "export", "import", "compare",
           "watch", "explain", "rank", "filter", "count", "plan", "check", "share", "archive", "restore",
           "tag", "merge", "split", "preview", "schedule"]
QUESTIONS = ["What's the weather in Lisbon tomorrow?", "Create a calendar event for Friday at 3pm",
             "How much is 100 USD in yen?", "Show me yesterday's git commits"]


def definition(i: int) -> dict:
    domain, action = DOMAINS[i % len(DOMAINS)], ACTIONS[(i // len(DOMAINS)) % len(ACTIONS)]
    return {
        "description": (f"{action.capitalize()} {domain} records through the {domain} service. Returns the "
                        f"matching items as JSON with their ids, titles and timestamps; pages of at most "
                        f"100 items. Use it when the user asks to {action} {domain}; it never changes "
                        f"anything the user did not name."),
        "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string", "description": f"What to {action}, in the {domain} service's terms"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Items per page"},
            "cursor": {"type": "string", "description": "The page token a previous call returned"}},
            "required": ["query"]},
        "http": {"urlTemplate": "http://127.0.0.1:9/x", "allowedHosts": ["127.0.0.1"]},
    }


async def turn_tokens(sc: SidecarClient, chat: str, question: str) -> tuple[int, int, str]:
    """(estimated tokens, tools the provider received, why those)."""
    await sc.request("providers/set", {"id": "s", "kind": "scripted", "config": {"script": [{"echoTools": True}]}})
    sent = await sc.request("chat/send", {"chatId": chat, "content": question, "provider": "s"})
    evs = [n["params"]["event"] for n in sc.notifications
           if n["method"] == "chat/event" and n["params"]["messageId"] == sent["messageId"]]
    (offered,) = [e for e in evs if e["kind"] == "toolsOffered"]
    names = json.loads("".join(e["text"] for e in evs if e["kind"] == "textDelta"))
    return offered["tokens"], len(names), offered["reason"]


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with SidecarClient.spawn(Path(tmp) / "data") as sc:
            await sc.request("toolsets/create", {"id": "bench", "name": "Bench"})
            for i in range(n):
                await sc.request("tools/put", {"toolsetId": "bench", "slug": f"t{i}", "version": "1",
                                               "definition": definition(i)})
            print(f"{n} generated tools + built-ins; tokens of definitions sent per turn (estimate: JSON chars / 4)")
            print(f"{'question':44} {'all':>8} {'auto':>8} {'tools all/auto':>15} reason(auto)")
            for q in QUESTIONS:
                await sc.request("settings/set", {"toolSelection": "all"})
                chat = (await sc.request("chats/create", {"title": "m"}))["chat"]["id"]
                all_tokens, all_count, _ = await turn_tokens(sc, chat, q)
                await sc.request("settings/set", {"toolSelection": "auto"})
                chat = (await sc.request("chats/create", {"title": "m"}))["chat"]["id"]
                auto_tokens, auto_count, reason = await turn_tokens(sc, chat, q)
                print(f"{q[:44]:44} {all_tokens:>8} {auto_tokens:>8} {all_count:>7}/{auto_count:<7} {reason}")
                if auto_tokens > 2000:
                    print("  OVER the 2,000-token budget of issue 28")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=500)
    anyio.run(main, parser.parse_args().tools)
