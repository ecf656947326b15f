"""tools/search: the tool catalog searched and ranked."""

from __future__ import annotations

from ..api.search import SearchToolsParams, SearchToolsResult
from ..rpc import RequestContext
from ..tools.search import ToolSearch
from .routes import method


class SearchHandlers:
    def __init__(self, search: ToolSearch) -> None:
        self.search = search

    @method("tools/search")
    async def tools_search(self, p: SearchToolsParams, ctx: RequestContext) -> SearchToolsResult:
        return await self.search.search(p)
