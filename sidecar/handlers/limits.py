"""toolsets/getLimits and toolsets/setLimits: the user's sandbox settings for a whole toolset."""

from __future__ import annotations

from ..api.limits import SetToolsetLimitsParams, ToolsetLimits, ToolsetLimitsParams
from ..rpc import RequestContext
from ..tools import limits
from ..tools.catalog import Catalog
from .routes import method


class LimitHandlers:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    @method("toolsets/getLimits")
    async def get(self, p: ToolsetLimitsParams, ctx: RequestContext) -> ToolsetLimits:
        return limits.toolset_view(p.id, *await self.catalog.toolset_limits(p.id))

    @method("toolsets/setLimits")
    async def set(self, p: SetToolsetLimitsParams, ctx: RequestContext) -> ToolsetLimits:
        await self.catalog.set_toolset_limits(p.id, p.constraints, p.sandbox)
        return limits.toolset_view(p.id, *await self.catalog.toolset_limits(p.id))
