"""tools/list a page at a time, and the usage tools/list and tools/get show.

One order for every provider: by tool id. The stored tools (built-in, Python, HTTP) are paged in
SQL on their primary key; the live MCP tools are walked in the same order (`mcp.in_order`) and
merged in, so a page builds the views of about the tools it returns, not of the whole catalog.
Toolset and enabled filters are in SQL; what a view decides (tags, and MCP tools' enabled state)
is checked on the views, reading more rows until the page is full.

Usage comes from ``tool_usage``, read for the page's tools after the queued call records (and so
their counts) are written: a call already answered shows in the next read.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from ..api.tools import Tool, ToolsListParams, ToolsResult
from ..paging import Pages
from ..store.tool_calls import ToolCallRepo
from ..store.tool_catalog import CatalogRow, ToolCatalogRepo
from ..store.tool_config import ConfigValue
from ..store.tool_usage import ToolUsageRepo
from ..store.toolsets import OverrideRow
from .catalog import BUILTIN, Catalog, layered, view
from .providers import mcp as mcp_tools


class ToolQuery(msgspec.Struct, frozen=True, kw_only=True):
    """What tools/list selects (what its page tokens are made for)."""

    toolset_ids: list[str] | None  # sorted; "builtin" names the built-ins
    tags: list[str] | None  # sorted
    include_disabled: bool

    def keeps(self, tool: Tool) -> bool:
        if not self.include_disabled and not tool.enabled:
            return False
        return self.tags is None or not set(self.tags).isdisjoint(tool.tags)


def query_of(p: ToolsListParams) -> ToolQuery:
    return ToolQuery(toolset_ids=sorted(set(p.toolset_ids)) if p.toolset_ids is not None else None,
                     tags=sorted(set(p.tags)) if p.tags is not None else None,
                     include_disabled=p.include_disabled)


class ToolListing:
    def __init__(self, catalog: Catalog, calls: ToolCallRepo) -> None:
        self.catalog = catalog
        self.calls = calls  # its queue of records not written yet, which usage waits for

    async def page(self, p: ToolsListParams) -> ToolsResult:
        q = query_of(p)
        pages = Pages("tools/list", q, tuple[str])
        after = pages.after(p.page_token)
        tools = await self._from(after[0] if after is not None else None, p.page_size + 1, q)
        tools, token = pages.page(tools, p.page_size, lambda t: (t.id,))
        return ToolsResult(await self.with_usage(tools), token)

    async def get(self, tool_id: str) -> Tool:
        return (await self.with_usage([await self.catalog.get_tool(tool_id)]))[0]

    async def with_usage(self, tools: list[Tool]) -> list[Tool]:
        await self.calls.flush()
        usage = await ToolUsageRepo(self.catalog.db).of([t.id for t in tools])
        return [msgspec.structs.replace(t, call_count=u.call_count, last_called_at=u.last_called_at)
                if (u := usage.get(t.id)) is not None else t for t in tools]

    async def _from(self, after: str | None, count: int, q: ToolQuery) -> list[Tool]:
        """Up to ``count`` tools ``q`` keeps, with ids past ``after``, by id."""
        ids = frozenset(q.toolset_ids) if q.toolset_ids is not None else None
        stored = _Stored(self.catalog, q, count)
        live: Iterator[Tool] = await mcp_tools.in_order(self.catalog.db, self.catalog.host, after, ids)
        found: list[Tool] = []
        s: Tool | None = None
        m = next(live, None)
        more = True  # stored tools may follow
        while len(found) < count:
            if s is None and more:  # read only when needed: a full page reads no chunk past it
                s = await stored.next(after)
                more = s is not None
            if s is None and m is None:
                break
            if m is None or (s is not None and s.id < m.id):
                tool, s = s, None
            else:
                tool, m = m, next(live, None)
            assert tool is not None
            if q.keeps(tool):
                found.append(tool)
        return found


class _Stored:
    """The stored tools past a position, by id: rows read a chunk at a time (the first small, then
    doubling up to ``chunk``) and each view made only when it is taken. (A first page of MCP tools,
    whose ids sort first, had read and viewed 101 stored rows to take one: half its time.)"""

    FIRST = 16

    def __init__(self, catalog: Catalog, q: ToolQuery, chunk: int) -> None:
        self.catalog = catalog
        self.chunk = chunk
        self.size = min(chunk, self.FIRST)
        ids = q.toolset_ids
        self.toolset_ids = [i for i in ids if i != BUILTIN] if ids is not None else None
        self.builtins = ids is None or BUILTIN in ids
        self.enabled_only = not q.include_disabled
        self.rows: list[CatalogRow] = []  # the chunk not taken yet, last first
        self.values: dict[str, list[ConfigValue]] = {}
        self.patterns: dict[str, list[OverrideRow]] = {}
        self.last: str | None = None
        self.done = False

    async def next(self, after: str | None = None) -> Tool | None:
        if not self.rows and not self.done:
            await self._read(after if self.last is None else self.last)
        if not self.rows:
            return None
        row, applied = layered(self.rows.pop(), self.patterns)
        return view(row, self.values.get(row.toolset_id or "", []), applied, self.catalog.mechanism())

    async def _read(self, after: str | None) -> None:
        rows = await ToolCatalogRepo(self.catalog.db).page(
            self.size, after, toolset_ids=self.toolset_ids, builtins=self.builtins, enabled_only=self.enabled_only)
        self.done = len(rows) < self.size
        self.size = min(self.size * 2, self.chunk)
        if rows:
            self.last = rows[-1].tool_id
        self.values = await self.catalog.config_values()
        self.patterns = await self.catalog.patterns()  # (rows dropped in SQL are off whatever a pattern says)
        self.rows = rows[::-1]
