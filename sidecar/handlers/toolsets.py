from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import msgspec

from .. import secrets
from ..api.base import Empty
from ..api.errors import InvalidBundle
from ..api.toolsets import (
    BundleFile,
    ConfiguredServer,
    ExportParams,
    ExportResult,
    HtmlPageParams,
    HtmlPageResult,
    ImportParams,
    InspectedServer,
    InspectedTool,
    InspectParams,
    InspectResult,
    ManifestInfo,
    SetEnabledParams,
    SetOverrideParams,
    ToolCall,
    ToolCallParams,
    ToolCallResult,
    ToolIdParams,
    ToolResult,
    Toolset,
    ToolsetDetail,
    ToolsetIdParams,
    ToolsetResult,
    ToolsetsResult,
    ToolsListParams,
    ToolsResult,
)
from ..mcp_host.host import McpHost
from ..rpc import RequestContext
from ..store import Database
from ..tools.calls import ToolCallService
from ..toolsets.service import ToolsetRow, ToolsetService
from .routes import method


def toolset_out(t: ToolsetRow) -> Toolset:
    return Toolset(id=t.id, name=t.name, version=t.version, description=t.description,
                   enabled=t.enabled, user_mcp=t.user_mcp, source_type=t.source_type,  # type: ignore[arg-type]
                   installed_at=t.installed_at, source_ref=t.source_ref)


class ToolsetHandlers:
    def __init__(self, toolsets: ToolsetService, tool_calls: ToolCallService, db: Database, mcp: McpHost) -> None:
        self.toolsets = toolsets
        self.tool_calls = tool_calls
        self.db = db
        self.mcp = mcp

    @method("toolsets/inspect")
    async def inspect(self, p: InspectParams, ctx: RequestContext) -> InspectResult:
        from ..toolsets import bundle  # yaml and ast: loaded on first use

        try:
            b = await anyio.to_thread.run_sync(bundle.read, p.path)
        except bundle.BundleError as exc:
            raise InvalidBundle(exc.path, exc.reason) from None
        m = b.manifest
        renderers = {o.tool_id: o.renderer for o in b.parsed.overrides if o.renderer}
        return InspectResult(
            manifest=ManifestInfo(m.id, m.name, m.version, m.description, m.manifest_version),
            source_type=b.source_type,  # type: ignore[arg-type]
            tools=[
                InspectedTool(
                    id=f"{m.id}:{t.id}", name=t.name or t.id, description=t.description or "",
                    entrypoint=t.entrypoint, requires_confirmation=t.requires_confirmation,
                    renderer=renderers.get(t.id), timeout=t.timeout,
                )
                for t in m.tools
            ],
            mcp_servers=[
                InspectedServer(
                    id=s.id, type=s.type,
                    command=secrets.masked_command(s.command, s.args),
                    url=secrets.mask_url(s.url) if s.url else None, cwd=s.cwd,
                    env=secrets.mask_map(s.env), headers=secrets.mask_map(s.headers),
                )
                for s in m.mcp_servers
            ],
            files=[BundleFile(path, bundle.kind_of(path), len(data))  # type: ignore[arg-type]
                   for path, data in sorted(b.files.items())],
            warnings=b.warnings,
        )

    @method("toolsets/import")
    async def import_(self, p: ImportParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.toolsets.install(p.path, replace=p.replace)))

    @method("toolsets/list")
    async def list_toolsets(self, p: None, ctx: RequestContext) -> ToolsetsResult:
        return ToolsetsResult([toolset_out(t) for t in await self.toolsets.list()])

    @method("toolsets/get")
    async def get(self, p: ToolsetIdParams, ctx: RequestContext) -> ToolsetDetail:
        from ..tools import catalog as registry

        toolset = await self.toolsets.get(p.id)
        servers = await self.toolsets.server_rows(p.id)
        return ToolsetDetail(
            toolset_out(toolset),
            await registry.toolset_tools(self.db, p.id),  # type: ignore[arg-type]
            [ConfiguredServer(id=f"{p.id}~{r[0]}", server_id=r[0], toolset_id=p.id, type=r[1],
                              enabled=bool(r[10]),
                              command=secrets.masked_command(r[2], json.loads(r[3])),
                              url=secrets.mask_url(r[5]) if r[5] else None)
             for r in servers],
        )

    @method("toolsets/export")
    async def export(self, p: ExportParams, ctx: RequestContext) -> ExportResult:
        path, size, sha = await self.toolsets.export(p.id, p.path)
        return ExportResult(str(path), size, sha)

    @method("toolsets/setEnabled")
    async def set_enabled(self, p: SetEnabledParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.toolsets.set_enabled(p.id, p.enabled)))

    @method("toolsets/uninstall")
    async def uninstall(self, p: ToolsetIdParams, ctx: RequestContext) -> Empty:
        await self.toolsets.uninstall(p.id)
        return Empty()

    @method("tools/list")
    async def tools_list(self, p: ToolsListParams, ctx: RequestContext) -> ToolsResult:
        from ..tools import catalog as registry

        return ToolsResult(await registry.list_tools(self.db, p.include_disabled, self.mcp))  # type: ignore[arg-type]

    @method("tools/get")
    async def tools_get(self, p: ToolIdParams, ctx: RequestContext) -> ToolResult:
        from ..tools import catalog as registry

        return ToolResult(await registry.get_tool(self.db, p.id, self.mcp))  # type: ignore[arg-type]

    @method("tools/setOverride")
    async def set_override(self, p: SetOverrideParams, ctx: RequestContext) -> ToolResult:
        from ..tools import catalog as registry

        changes = {f: getattr(p, f) for f in p.__struct_fields__
                   if f not in ("toolset_id", "tool_id") and getattr(p, f) is not msgspec.UNSET}
        return ToolResult(await registry.set_override(self.db, p.toolset_id, p.tool_id, changes, self.mcp))  # type: ignore[arg-type]

    @method("tools/call")
    async def call(self, p: ToolCallParams, ctx: RequestContext) -> ToolCallResult:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            if p.work_done_token is not None:
                value: dict[str, Any] = {"kind": "report"}
                if total:
                    value["percentage"] = min(100, int(done * 100 / total))
                if message:
                    value["message"] = message
                await ctx.progress(p.work_done_token, value)

        row = await self.tool_calls.call(p.tool_id, p.args, p.chat_id, on_progress=progress)
        return ToolCallResult(msgspec.convert(row, ToolCall, from_attributes=True))

    @method("tools/htmlPage")
    async def html_page(self, p: HtmlPageParams, ctx: RequestContext) -> HtmlPageResult:
        return HtmlPageResult(await self.tool_calls.html_page(p.tool_call_id))

