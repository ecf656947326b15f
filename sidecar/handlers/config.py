"""config/*: per-tool configuration (seed 004)."""

from __future__ import annotations

from ..api.config import (
    ConfigDeleteParams,
    ConfigGetResult,
    ConfigScopeParams,
    ConfigSetParams,
    ConfigStatusResult,
    ConfigTestResult,
)
from ..rpc import RequestContext
from ..tools.config import ToolConfig
from .routes import method


class ConfigHandlers:
    def __init__(self, config: ToolConfig) -> None:
        self.config = config

    @method("config/get")
    async def get(self, p: ConfigScopeParams, ctx: RequestContext) -> ConfigGetResult:
        fields, status = await self.config.get(p.toolset_id, p.tool_id)
        return ConfigGetResult(fields, status)

    @method("config/set")
    async def set(self, p: ConfigSetParams, ctx: RequestContext) -> ConfigStatusResult:
        return ConfigStatusResult(await self.config.set(p.toolset_id, p.tool_id, p.values))

    @method("config/delete")
    async def delete(self, p: ConfigDeleteParams, ctx: RequestContext) -> ConfigStatusResult:
        return ConfigStatusResult(await self.config.delete(p.toolset_id, p.tool_id, p.key))

    @method("config/test")
    async def test(self, p: ConfigScopeParams, ctx: RequestContext) -> ConfigTestResult:
        ok, message, missing = await self.config.test(p.toolset_id, p.tool_id)
        return ConfigTestResult(ok, message, missing)
