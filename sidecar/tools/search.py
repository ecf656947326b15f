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

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..api.search import SearchHit, SearchMatch, SearchToolsParams, SearchToolsResult
from ..api.toolsets import Tool
from ..paging import Pages
from ..store import CATALOG, Database
from ..store.tool_search import SearchDoc, ToolSearchRepo, match_of, words_of
from . import slugs
from .catalog import BUILTIN

if TYPE_CHECKING:
    from .catalog import Catalog

MATCHES: tuple[SearchMatch, ...] = ("prefix", "word", "fuzzy", "recent")  # by tier

Position = tuple[int, str, int, str]


def doc_of(tool: Tool) -> SearchDoc:
    """A tool's document, from its view as tools/list shows it (overrides and patterns applied)."""
    name = tool.id.rsplit(":", 1)[-1]  # (the whole id of a built-in)
    display = tool.name if not tool.title or tool.title == tool.name else f"{tool.name} {tool.title}"
    return SearchDoc(tool_id=tool.id, toolset_id=tool.toolset_id or BUILTIN, enabled=tool.enabled,
                     modified_at=tool.modified_at or "", slug=tool.slug or slugs.derive(name),
                     name=name, display=display, description=tool.description, tags=" ".join(tool.tags))


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
