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

from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

import anyio

from ..api.search import SearchHit, SearchMatch, SearchToolsParams, SearchToolsResult
from ..api.toolsets import Tool
from ..paging import Pages
from ..store import CATALOG, Database
from ..store.tool_search import SearchDoc, ToolSearchRepo, match_of, words_of
from . import slugs
from .catalog import BUILTIN
from .query import Corrector, any_of, tokens, understand, why
from .ranking import Ranked

if TYPE_CHECKING:
    from .catalog import Catalog

MATCHES: tuple[SearchMatch, ...] = ("prefix", "word", "fuzzy", "recent")  # by tier

Position = tuple[int, str, int, str]


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


def _same(a: Listings, b: Listings) -> bool:
    # Identity, not equality: a server's list object is replaced whenever its tools are listed again.
    return len(a) == len(b) and all(ka == kb and la is lb for (ka, la), (kb, lb) in zip(a, b, strict=True))


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
        self._corrector: tuple[int, Corrector] | None = None  # with the index generation it was read at

    async def corrector(self) -> Corrector:
        """The index's vocabulary, read again only after the index changed."""
        generation = self.repo.generation
        if self._corrector is None or self._corrector[0] != generation:
            self._corrector = (generation, Corrector(await self.repo.vocabulary()))
        return self._corrector[1]

    async def lexical(self, text: str, *, limit: int, tool_ids: Collection[str] | None = None) -> list[Ranked]:
        """The Ranker's lexical mode (tools/ranking.py): bm25 over every enabled tool of every
        provider (name and slug weigh most, then title, tags, description, parameters), the text's
        words corrected against the index's vocabulary, common words left out (tools/query.py).
        Scores are bm25's divided by the best one's: the first is 1."""
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
        texts = await self.repo.texts([r.tool_id for r in rows])
        best = rows[0].score
        return [Ranked(r.tool_id, round(r.score / best, 4) if best > 0 else 1.0,
                       why(words, tokens(texts.get(r.tool_id, "")))[1]) for r in rows]

    async def search(self, p: SearchToolsParams) -> SearchToolsResult:
        words = words_of(p.q)
        toolsets = sorted(set(p.toolset_ids)) if p.toolset_ids is not None else None
        pages = Pages("tools/search", {"q": [w.casefold() for w in words], "includeDisabled": p.include_disabled,
                                       "toolsetIds": toolsets}, Position)
        after = pages.after(p.page_token)
        await self.refresh()
        rows = await self.repo.search(match_of(words), include_disabled=p.include_disabled, toolset_ids=toolsets,
                                      after=after, limit=p.page_size + 1)
        page, token = pages.page(rows, p.page_size, lambda r: r.position())
        tools = await self._views([r.tool_id for r in page])
        why: dict[str, SearchMatch] = {r.tool_id: MATCHES[r.tier] for r in page}
        shown = await self.with_usage([tools[r.tool_id] for r in page if r.tool_id in tools])
        return SearchToolsResult([SearchHit(t, why[t.id]) for t in shown], token)

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
        return version is not None and version == self._version and _same(self.catalog.host.listings(),
                                                                           self._listings)

    async def refresh(self) -> None:
        """Make the index match the catalog, if anything changed since it last did."""
        if self._mcp_current() and not await self.repo.dirty():
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
            if self._mcp_docs is not None and not mcp_done and _same(listings, self._listings):
                # Nothing an MCP tool's view depends on was written, and no server listed again.
                await self.repo.sync(reindex, gone, done)
                self._version = version
                return
            live = await self.catalog.mcp_tools()
            was = self._mcp_docs if self._mcp_docs is not None else {d.tool_id: d for d in await self.repo.mcp_docs()}
            now = {t.id: doc_of(t) for t in live}
            self._mcp_docs = None  # until the write below is known to have landed
            await self.repo.sync(reindex + [d for k, d in now.items() if was.get(k) != d],
                                 gone + [k for k in was if k not in now], done, mcp_done)
            self._mcp_docs, self._mcp = now, {t.id: t for t in live}
            # Read while a catalog write was open (None): the next search looks again.
            self._version, self._listings = version, listings
