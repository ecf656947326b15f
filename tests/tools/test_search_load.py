"""tools/search and the lexical ranker under what a catalog can throw at them, over the real
services and a real SQLite file: 5,000 tools described alike, a 1 MB description, a server that
lists its tools again 100 times a second, and queries made of syntax, emoji or 16 KiB of text."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from sidecar.api.mcp import AddParams
from sidecar.api.search import MAX_QUERY, SearchToolsParams
from sidecar.compose import Services
from sidecar.tools.search import TEXT_CAP
from tests.tools.search_helpers import Peer, built, install_into

pytestmark = pytest.mark.anyio

RELISTS = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "relists.py"
ALIKE = "Fetch the latest report"
OTHER = "Send the weekly invoice"


async def page(services: Services, q: str, token: str | None = None, size: int = 500) -> tuple[list[str], str | None]:
    result = await services.search.search(SearchToolsParams(q, page_size=size, page_token=token))
    return [h.tool.id for h in result.hits], result.next_page_token


async def every_page(services: Services, q: str, size: int = 500) -> list[str]:
    found, token = await page(services, q, size=size)
    while token is not None:
        more, token = await page(services, q, token, size)
        found += more
    return found


async def test_five_thousand_tools_described_alike_page_in_a_total_order(tmp_path: Path):
    async with built(tmp_path / "data") as (services, _):
        for k in range(10):  # (a manifest holds at most 50,000 values: ten toolsets of 500)
            await install_into(services, tmp_path / "src", f"alike{k}",
                               {f"tool_{i:03d}": ALIKE if k < 2 else OTHER for i in range(500)})
        invoices = await every_page(services, "weekly invoice")
        assert len(invoices) == len(set(invoices)) == 4000
        assert await every_page(services, "weekly invoice", size=137) == invoices  # any page size: the same order
        whole = await every_page(services, "latest report", size=100)
        assert len(whole) == len(set(whole)) == 1000
        assert (await every_page(services, "lates reprt"))[:5] == whole[:5]  # corrected: ranked the same
        # A tool installed between pages moves every bm25 score (a word's rarity changed): the next
        # pages still go on from where the first ended, neither repeating nor skipping, both while
        # the first pages' ranking is kept and past it.
        first, token = await page(services, "latest report", size=100)
        await install_into(services, tmp_path / "late", "late", {"newest": ALIKE + " " + ALIKE})
        rest: list[str] = []
        while token is not None:
            more, token = await page(services, "latest report", token, 100)
            rest += more
        assert first + rest == whole
        assert "late:newest" in await every_page(services, "latest report")
        # A token whose kept ranking is gone (eight other long queries since) goes on from its last tool.
        first, token = await page(services, "report", size=100)
        for n in range(9):
            await page(services, f"fetch latest {n}", size=10)
        await install_into(services, tmp_path / "later", "later", {"newer": ALIKE})
        assert token is not None
        more, _ = await page(services, "report", token, 100)
        assert not set(first) & set(more) and len(more) == 100
        # Everything, by recency (the empty query): every tool once.
        everything = await every_page(services, "")
        assert len(everything) == len(set(everything)) >= 5002
        # The lexical ranker over the same catalog: bounded by its limit, ties by id.
        ranked = await services.search.lexical("latest report", limit=20)
        assert [r.tool_id for r in ranked[:2]] == ["late:newest", "later:newer"] and len(ranked) == 20  # (shorter)
        assert len({r.score for r in ranked[2:]}) == 1
        assert [r.tool_id for r in ranked[2:]] == sorted(r.tool_id for r in ranked[2:])


HOSTILE = ['"', '""', "*", "report*", '"report', "NEAR(report latest)", "report NEAR latest", "-report",
           "NOT report", "report OR nothing", "report AND", "^report", "{slug}: report", "slug:report", "(report",
           "report)", "'; DROP TABLE tools; --", "\x00report", "report\u202e", "\u200f\u200e\u202b",
           "🔍📈🗓️", "👨‍👩‍👧‍👦" * 100, "Ｒｅｐｏｒｔ", "سبحث", "搜索", "\\", "%_", "a" * MAX_QUERY,
           "x y " * (MAX_QUERY // 4), "report " * (MAX_QUERY // 7), " ".join(f"w{i}x" for i in range(3000))[:MAX_QUERY],
           "weathr " * 2000, "NEAR/3", "report:*", "a:b:c", "-- --", "OR OR OR", "AND", "NEAR"]


async def test_hostile_text_never_reaches_fts5_as_syntax(tmp_path: Path):
    async with built(tmp_path / "data") as (services, _):
        await install_into(services, tmp_path / "src", "reports", {"fetch_report": ALIKE, "weather": "Rain or sun"})
        for q in HOSTILE:
            assert isinstance(await every_page(services, q, size=50), list), q[:40]
            assert isinstance(await services.search.lexical(q, limit=10), list), q[:40]
        # The syntax was text: what is left of it are the words.
        assert (await page(services, 'report" OR "*'))[0][0] == "reports:fetch_report"
        assert [r.tool_id for r in await services.search.lexical('"report*" NEAR(x)', limit=1)] == [
            "reports:fetch_report"]
        assert await every_page(services, "🔍📈🗓️") == await every_page(services, "")  # no word: everything


async def _connected(services: Services, peer: Peer, key: str) -> None:
    await peer.until(lambda: services.mcp_servers.host.state(key).status in ("connected", "error"))
    assert services.mcp_servers.host.state(key).status == "connected"


async def test_a_huge_description_is_indexed_up_to_a_cap(tmp_path: Path):
    async with built(tmp_path / "data") as (services, peer):
        await services.mcp_servers.add(AddParams(id="relists", command=sys.executable, args=[str(RELISTS)]))
        await _connected(services, peer, "relists~relists")
        chatty = "mcp:relists~relists:chatty"
        assert (await page(services, "wombat burrow"))[0][:1] == [chatty]  # said first: found
        assert await page(services, "zebraword") == ([], None)  # a megabyte later: not indexed
        text = (await services.search.repo.texts([chatty]))[chatty]
        assert len(text) < 3 * TEXT_CAP  # (name, slug, id, title, capped description, no tags or parameters)


async def test_a_server_listing_the_same_tools_100_times_a_second_costs_no_diff(tmp_path: Path):
    async with built(tmp_path / "data") as (services, peer):
        key = "relists~relists"
        await services.mcp_servers.add(AddParams(id="relists", command=sys.executable, args=[str(RELISTS)]))
        await _connected(services, peer, key)
        assert (await page(services, "tool number 7"))[0][0] == "mcp:relists~relists:tool_007"
        diffs, writes, relisted = services.search.mcp_diffs, services.db.transactions, peer.counts.get(
            "mcpServers/status", 0)
        searched = 0

        async def storm() -> None:
            await services.mcp_servers.host.call_tool(key, "storm", {"times": 200, "per_second": 100})
            await peer.notify("storm/done")

        def relists() -> int:
            return peer.counts.get("mcpServers/status", 0) - relisted

        async with anyio.create_task_group() as tg:
            tg.start_soon(storm)
            # A search after every re-list the UI hears of, while the server keeps re-listing (the
            # host lists again once per burst of notifications: fewer re-lists than notifications).
            while "storm/done" not in peer.counts:
                seen = relists()
                assert (await page(services, "tool number 7"))[0][0] == "mcp:relists~relists:tool_007"
                searched += 1
                await peer.until(lambda seen=seen: relists() > seen or "storm/done" in peer.counts)
        assert relists() >= 10 and searched >= 10
        assert services.search.mcp_diffs == diffs  # the same tools: never made into views and diffed again
        assert services.db.transactions - writes <= 2  # (the call's own record, at most): the index wrote nothing


async def test_a_write_no_catalog_writer_announced_is_still_found_by_the_next_search(tmp_path: Path):
    """Searches in a row skip the look at the index's marks while no row was written; any write
    (here one outside the catalog's writers, marked by the triggers alone) makes the next look."""
    async with built(tmp_path / "data") as (services, _):
        await install_into(services, tmp_path / "ts", "zoo", {"feed": "Feed the quokka"})
        assert await page(services, "quokka") == (["zoo:feed"], None)
        assert await page(services, "quokka") == (["zoo:feed"], None)  # (nothing written: no look)
        async with services.db.write() as w:
            await w.execute("UPDATE tools SET description = 'Feed the wombat' WHERE tool_id = 'zoo:feed'")
        assert await page(services, "quokka") == ([], None)
        assert await page(services, "wombat") == (["zoo:feed"], None)
