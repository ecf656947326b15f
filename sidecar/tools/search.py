"""tools/search: ranked search over every provider's tools (seed 002), on the FTS5 index of
store/tool_search.py.

The index is kept in line with what tools/list shows, lazily, by the next search after a change:
the stored tools (built-in, Python, HTTP) that any write touched -- a toolset installed, removed,
enabled or deleted, an override or pattern, a tool put or deleted -- are marked by triggers
(migration 0012), whoever wrote, and indexed again from their views; the MCP tools, which live
only in their connections, are diffed as views when a write touched what their views depend on
(an override, its toolset, a server row or what a server last listed: marked per toolset by
triggers too) or a server's tools changed (it connected, listed them again or went away). Usage
follows tool_usage by triggers too. No writer has to remember to tell the index.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

import anyio

from ..api.search import SearchHit, SearchMatch, SearchTerm, SearchToolsParams, SearchToolsResult
from ..api.tools import Tool
from ..paging import Pages
from ..store import CATALOG, Database
from ..store.tool_search import RELEVANCE_SCALE, HitRow, Match, SearchDoc, ToolSearchRepo, match_of, words_of
from . import slugs
from .catalog import BUILTIN
from .query import Corrector, Text, any_of, matched, understand, why
from .ranking import Ranked

if TYPE_CHECKING:
    from .catalog import Catalog

MATCHES: tuple[SearchMatch, ...] = ("prefix", "word", "fuzzy", "recent")  # by tier

# Where a page ended: the snapshot it was read from (0: none), then the hit's place in the ranking
# (tier, relevance, modified_at, call_count, tool_id).
Position = tuple[int, int, int, str, int, str]
SNAPSHOTS = 8  # rankings kept for their next pages
# A kept ranking holds the first SNAPSHOT_PAGES pages, at most SNAPSHOT_ROWS hits (~100 bytes a hit):
# reading a whole ranking of 5,000 hits costs the first page several milliseconds, and people
# rarely page far; pages past it go on by position.
SNAPSHOT_PAGES = 4
SNAPSHOT_ROWS = 10_000
# Hits' texts kept (folded, to tell which query words each holds), while the index stays as it was:
# the palette asks again at every keystroke, mostly for the hits it showed before.
TEXTS = 1024


# What is indexed of each field, at most (characters). A tool's text is written by whoever made
# the tool, an MCP server included: a 1 MB description would cost a megabyte of index, of diffing
# and of bm25 length for every search, and what decides whether a tool is the one meant is said in
# its first paragraphs. Names and titles are short in any honest tool.
NAME_CAP = 256
TEXT_CAP = 4096  # description, tags, parameters
PARAMS = 64  # parameters described, at most


def _capped(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[:cap]


def params_text(schema: dict[str, Any] | None) -> str:
    """The names and descriptions of an inputSchema's properties (top level: what a caller says)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return ""
    parts: list[str] = []
    for name, prop in list(props.items())[:PARAMS]:
        parts.append(str(name))
        if isinstance(prop, dict):
            for key in ("title", "description"):
                value = prop.get(key)
                if isinstance(value, str):
                    parts.append(value[:TEXT_CAP])
    return _capped(" ".join(parts), TEXT_CAP)


def doc_of(tool: Tool) -> SearchDoc:
    """A tool's document, from its view as tools/list shows it (overrides and patterns applied),
    each field capped (NAME_CAP, TEXT_CAP)."""
    name = tool.id.rsplit(":", 1)[-1]  # (the whole id of a built-in)
    display = tool.name if not tool.title or tool.title == tool.name else f"{tool.name} {tool.title}"
    return SearchDoc(tool_id=tool.id, toolset_id=tool.toolset_id or BUILTIN, enabled=tool.enabled,
                     modified_at=tool.modified_at or "", slug=_capped(tool.slug or slugs.derive(name), NAME_CAP),
                     name=_capped(name, NAME_CAP), display=_capped(display, NAME_CAP),
                     description=_capped(tool.description, TEXT_CAP),
                     tags=_capped(" ".join(tool.tags), TEXT_CAP), params=params_text(tool.input_schema))


Listings = list[tuple[str, Any]]
WithUsage = Callable[[list[Tool]], Awaitable[list[Tool]]]


_NO_TEXT = Text("")


def same_listings(a: Listings, b: Listings) -> bool:
    # Identity first: a server's list object is replaced whenever its tools are listed again. A new
    # list equal to the last one (a server listing the same tools again, even 100 times a second)
    # costs one comparison of that server's tools: no views made, no diff, no write.
    return len(a) == len(b) and all(ka == kb and (la is lb or la == lb)
                                    for (ka, la), (kb, lb) in zip(a, b, strict=True))


class ToolSearch:
    def __init__(self, db: Database, catalog: Catalog, with_usage: WithUsage) -> None:
        self.db = db
        self.catalog = catalog
        self.with_usage = with_usage  # tools/list's: the hits show callCount and lastCalledAt as it does
        self.repo = ToolSearchRepo(db)
        self._lock = anyio.Lock()
        self._version: int | None = None  # the CATALOG version the index was last made current at
        self._listings: Listings = []
        self._mcp_docs: dict[str, SearchDoc] | None = None  # the MCP tools as indexed (read once)
        self._mcp: dict[str, Tool] = {}  # their views, to answer with
        self._stored: dict[str, Tool] = {}  # stored tools' views read for hits, while the catalog stays
        self._views_version: int | None = None
        self._clean_at = -1  # Database.changes() when the marks were last read and found empty
        self.mcp_diffs = 0  # how often every MCP tool's view was made and diffed (what refreshing costs)
        self._corrector: tuple[int, Corrector] | None = None  # with the index generation it was read at
        self._texts: dict[str, Text] = {}  # hits' indexed texts, of the index generation below
        self._texts_generation = -1
        # id -> (the first hits of a ranking, each one's place in it, whether that is all of it)
        self._snapshots: OrderedDict[int, tuple[list[HitRow], dict[str, int], bool]] = OrderedDict()
        # Snapshot ids start anywhere, so a token from before a restart names none of this run's.
        self._snapshot_id = secrets.randbelow(1 << 40) + 1

    async def corrector(self) -> Corrector:
        """The index's vocabulary, read again only after the index changed."""
        generation = self.repo.generation
        if self._corrector is None or self._corrector[0] != generation:
            self._corrector = (generation, Corrector(await self.repo.vocabulary()))
        return self._corrector[1]

    async def lexical(self, text: str, *, limit: int, tool_ids: Collection[str] | None = None) -> list[Ranked]:
        """The Ranker's lexical mode (tools/ranking.py): bm25 over every enabled tool of every
        provider, or over ``tool_ids`` whatever their switch (name and slug weigh most, then title,
        tags, description, parameters), the text's words corrected against the index's vocabulary,
        common words left out (tools/query.py). Scores are bm25's divided by the best one's: the first is 1."""
        if limit <= 0 or (tool_ids is not None and not tool_ids):
            return []
        await self.refresh()
        words = understand(text, await self.corrector())
        match = any_of(words)
        if match is None:
            return []
        rows = await self.repo.lexical(match, tool_ids=sorted(set(tool_ids)) if tool_ids is not None else None,
                                       limit=limit)
        if not rows:
            return []
        texts = await self.texts([r.tool_id for r in rows])
        best = rows[0].score
        return [Ranked(r.tool_id, round(r.score / best, 4) if best > 0 else 1.0,
                       why(words, texts.get(r.tool_id, _NO_TEXT))) for r in rows]

    async def texts(self, tool_ids: list[str]) -> dict[str, Text]:
        """These tools' indexed texts (absent: not indexed), read once per index generation."""
        generation = self.repo.generation
        if generation != self._texts_generation:
            self._texts, self._texts_generation = {}, generation
        kept = self._texts
        missing = [t for t in tool_ids if t not in kept]
        read = {t: Text(v) for t, v in (await self.repo.texts(missing)).items()} if missing else {}
        if read and self.repo.generation == generation:  # (not when the index moved meanwhile)
            if len(kept) + len(read) > TEXTS:
                kept.clear()
            kept.update(read)
        return {t: v for t in tool_ids if (v := kept.get(t) or read.get(t)) is not None}

    async def search(self, p: SearchToolsParams) -> SearchToolsResult:
        typed = words_of(p.q)
        toolsets = sorted(set(p.toolset_ids)) if p.toolset_ids is not None else None
        pages = Pages("tools/search", {"q": [w.casefold() for w in typed], "includeDisabled": p.include_disabled,
                                       "toolsetIds": toolsets}, Position)
        after = pages.after(p.page_token)
        await self.refresh()
        words = understand(p.q, await self.corrector()) if typed else []
        match = match_of(typed, [w.typed for w in words], [t for w in words for t in w.terms]) if typed else None
        rows, snapshot = await self._ranked(match, p.include_disabled, toolsets, after, p.page_size)
        page, token = pages.page(rows, p.page_size, lambda r: (snapshot, *r.position()))
        tools = await self._views([r.tool_id for r in page])
        texts = await self.texts([r.tool_id for r in page]) if words else {}
        rank = {r.tool_id: r for r in page}
        shown = await self.with_usage([t for r in page if (t := tools.get(r.tool_id)) is not None
                                       and (t.enabled or p.include_disabled)])
        return SearchToolsResult([
            SearchHit(t, MATCHES[rank[t.id].tier],
                      [SearchTerm(q, term) for q, term in matched(words, texts.get(t.id, _NO_TEXT), inside=True)],
                      round(rank[t.id].relevance / RELEVANCE_SCALE, 4))
            for t in shown], token)

    async def _ranked(self, match: Match | None, include_disabled: bool, toolsets: list[str] | None,
                      after: Position | None, size: int) -> tuple[list[HitRow], int]:
        """Up to ``size + 1`` hits from ``after`` on, and the snapshot they were read from (0: none).

        Relevance depends on the whole catalog (bm25's rarity of a word, its average length), so a
        tool installed between two pages moves every score a little, and a position taken on the
        first page would no longer fall between the same two tools. A query whose hits fill more
        than a page therefore keeps its whole ranking (a snapshot, the last SNAPSHOTS of them) and
        its next pages are read from it: neither repeated nor skipped whatever changed meanwhile
        (a hit since removed or switched off is left out). A token whose snapshot is gone (older,
        or from before a restart), or past its end, goes on after the last tool it showed, from
        where that tool ranks now: exact while the catalog stays as it was."""
        if after is not None:
            snapshot, position = after[0], after[1:]
            kept = self._snapshots.get(snapshot)
            if kept is not None:
                self._snapshots.move_to_end(snapshot)
                rows, index, whole = kept
                start = index.get(position[-1])
                if start is not None:
                    chunk = rows[start + 1:start + 2 + size]
                    if whole or len(chunk) > size:
                        return chunk, snapshot
            if match is not None:
                # Go on after the last tool shown, from where it ranks now: tools that score alike
                # (5,000 described the same) move alike, so none of them is repeated or skipped.
                now = await self.repo.search(match, include_disabled=include_disabled, toolset_ids=toolsets,
                                             after=None, limit=1, tool_id=position[-1])
                position = now[0].position() if now else position
            rows = await self.repo.search(match, include_disabled=include_disabled, toolset_ids=toolsets,
                                          after=position, limit=size + 1)
            return rows, 0
        if match is None:  # the recency index's order holds still: positions are enough
            rows = await self.repo.search(None, include_disabled=include_disabled, toolset_ids=toolsets,
                                          after=None, limit=size + 1)
            return rows, 0
        kept = min(SNAPSHOT_ROWS, size * SNAPSHOT_PAGES)
        rows = await self.repo.search(match, include_disabled=include_disabled, toolset_ids=toolsets, after=None,
                                      limit=kept + 1)
        if len(rows) <= size:
            return rows, 0
        self._snapshot_id += 1
        self._snapshots[self._snapshot_id] = (rows[:kept], {r.tool_id: i for i, r in enumerate(rows[:kept])},
                                              len(rows) <= kept)
        while len(self._snapshots) > SNAPSHOTS:
            self._snapshots.popitem(last=False)
        return rows[:size + 1], self._snapshot_id

    async def _views(self, tool_ids: list[str]) -> dict[str, Tool]:
        """The hits' tools as tools/list shows them. A stored tool's view is kept until the catalog
        changes: a page of hits is mostly the same tools as the page before."""
        version = self.db.version(CATALOG)
        if version != self._views_version:
            self._stored, self._views_version = {}, version
        missing = [t for t in tool_ids if not t.startswith("mcp:") and t not in self._stored]
        loaded = {t.id: t for t in await self.catalog.stored_tools(missing)} if missing else {}
        if version is not None:  # (read while a catalog write was open: not kept)
            self._stored.update(loaded)
        known = self._stored | loaded
        return {t: v for t in tool_ids if (v := self._mcp.get(t) or known.get(t)) is not None}

    def _mcp_current(self) -> bool:
        version = self.db.version(CATALOG)
        if version is None or version != self._version:
            return False
        listings = self.catalog.host.listings()
        if not same_listings(listings, self._listings):
            return False
        self._listings = listings  # (equal lists: compared by identity from now on)
        return True

    async def refresh(self) -> None:
        """Make the index match the catalog, if anything changed since it last did."""
        if self._mcp_current():
            # Nothing marked since the marks were last seen empty: no row was written meanwhile.
            changes = self.db.changes()
            if changes == self._clean_at:
                return
            if not await self.repo.dirty():
                self._clean_at = changes  # (read before the marks: a write meanwhile moves it on)
                return
        async with self._lock:
            # Read before the marks: a write landing after them moves the version again.
            version, listings = self.db.version(CATALOG), self.catalog.host.listings()
            # The stored tools any write marked, as tools/list shows them now (gone: not shown).
            done = await self.repo.dirty()
            shown = await self.catalog.stored_tools([t for t, _ in done])
            reindex = [doc_of(t) for t in shown]
            gone = sorted({t for t, _ in done} - {t.id for t in shown})
            mcp_done = await self.repo.mcp_dirty()
            if self._mcp_docs is not None and not mcp_done and same_listings(listings, self._listings):
                # Nothing an MCP tool's view depends on was written, and no server listed again.
                await self.repo.sync(reindex, gone, done)
                self._version, self._listings = version, listings
                return
            self.mcp_diffs += 1
            live = await self.catalog.mcp_tools()
            was = self._mcp_docs if self._mcp_docs is not None else {d.tool_id: d for d in await self.repo.mcp_docs()}
            now = {t.id: doc_of(t) for t in live}
            self._mcp_docs = None  # until the write below is known to have landed
            await self.repo.sync(reindex + [d for k, d in now.items() if was.get(k) != d],
                                 gone + [k for k in was if k not in now], done, mcp_done)
            self._mcp_docs, self._mcp = now, {t.id: t for t in live}
            # Read while a catalog write was open (None): the next search looks again.
            self._version, self._listings = version, listings
