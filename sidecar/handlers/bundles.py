"""toolsets/import (from a file or a URL), toolsets/checkUpdate and toolsets/upgrade."""

from __future__ import annotations

from typing import Any

from ..api.bundles import CheckUpdateParams, UpdateCheck, UpgradeParams, UpgradeResult
from ..api.toolsets import ImportParams, ToolsetResult
from ..errors import InvalidParams
from ..mcp_host.servers import McpServers
from ..rpc import RequestContext
from ..tools import limits
from ..tools.catalog import Catalog
from ..toolsets.download import Progress
from ..toolsets.remote import RemoteBundles
from ..toolsets.service import ToolsetService
from .routes import method
from .toolsets import toolset_out


class BundleHandlers:
    def __init__(self, toolsets: ToolsetService, remote: RemoteBundles, catalog: Catalog,
                 servers: McpServers) -> None:
        self.toolsets = toolsets
        self.remote = remote
        self.catalog = catalog  # the installed tools' limits, for the answer's warnings
        self.servers = servers  # and its sandboxed MCP servers'

    @method("toolsets/import")
    async def import_(self, p: ImportParams, ctx: RequestContext) -> ToolsetResult:
        if (p.path is None) == (p.url is None):
            raise InvalidParams("params", "give either path (a bundle on this machine) or url (one to download), "
                                          "one of them")
        if p.path is not None:
            if p.sha256 is not None:
                raise InvalidParams("params.sha256", "sha256 checks a download: give it with url, not path")
            row = await self.toolsets.install(p.path, replace=p.replace)
        else:
            assert p.url is not None
            row = await self.remote.install(p.url, sha256=p.sha256, replace=p.replace,
                                            on_progress=_reporter(ctx, p.work_done_token))
        shown = limits.toolset_view(row.id, *await self.catalog.toolset_limits(row.id))
        return ToolsetResult(toolset_out(row),
                             limit_warnings=[*shown.warnings, *await self.servers.limit_warnings(row.id)])

    @method("toolsets/checkUpdate")
    async def check_update(self, p: CheckUpdateParams, ctx: RequestContext) -> UpdateCheck:
        found = await self.remote.check_update(p.id)
        return UpdateCheck(toolset_id=found.toolset_id, url=found.url, update_available=found.update_available,
                           current_version=found.current_version, current_sha256=found.current_sha256,
                           available_version=found.available_version, available_sha256=found.available_sha256,
                           not_modified=found.not_modified)

    @method("toolsets/upgrade")
    async def upgrade(self, p: UpgradeParams, ctx: RequestContext) -> UpgradeResult:
        before = await self.toolsets.get(p.id)
        row, upgraded = await self.remote.upgrade(p.id, sha256=p.sha256,
                                                  on_progress=_reporter(ctx, p.work_done_token))
        return UpgradeResult(toolset_out(row), upgraded, before.version)


def _reporter(ctx: RequestContext, token: int | str | None) -> Progress | None:
    """A download's progress as ``$/progress`` reports under the caller's token."""
    if token is None:
        return None

    async def progress(done: int, total: int | None) -> None:
        value: dict[str, Any] = {"kind": "report", "message": f"downloaded {done} bytes"}
        if total:
            value["percentage"] = min(100, done * 100 // total)
        await ctx.progress(token, value)

    return progress
