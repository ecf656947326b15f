"""Toolsets made in the UI and the HTTP tools put into them (issue 14)."""

from __future__ import annotations

from ..api.authoring import CreateToolsetParams, PutToolParams, ToolVersionParams, UpdateToolsetParams
from ..api.base import Empty
from ..api.tools import ToolResult
from ..api.toolsets import ToolsetResult
from ..rpc import RequestContext
from ..tools.catalog import Catalog
from ..toolsets.user_made import UserToolsets
from .routes import method
from .toolsets import toolset_out


class AuthoringHandlers:
    def __init__(self, user_toolsets: UserToolsets, catalog: Catalog) -> None:
        self.user_toolsets = user_toolsets
        self.catalog = catalog

    @method("toolsets/create")
    async def create(self, p: CreateToolsetParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.user_toolsets.create(p.id, p.name, p.description, p.enabled)))

    @method("toolsets/update")
    async def update(self, p: UpdateToolsetParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.user_toolsets.update(p.id, p.name, p.description)))

    @method("tools/put")
    async def put(self, p: PutToolParams, ctx: RequestContext) -> ToolResult:
        tool_id = await self.user_toolsets.put(p.toolset_id, p.slug, p.version, p.definition)
        return ToolResult(await self.catalog.get_tool(tool_id))

    @method("tools/delete")
    async def delete(self, p: ToolVersionParams, ctx: RequestContext) -> Empty:
        await self.user_toolsets.delete(p.toolset_id, p.slug, p.version)
        return Empty()

    @method("tools/setCurrent")
    async def set_current(self, p: ToolVersionParams, ctx: RequestContext) -> ToolResult:
        return ToolResult(await self.catalog.get_tool(
            await self.user_toolsets.set_current(p.toolset_id, p.slug, p.version)))
