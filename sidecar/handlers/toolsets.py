from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

import anyio.to_thread

from ..api.errors import InvalidBundle
from ..api.base import Empty
from ..api.toolsets import (
    BundleFile,
    ConfiguredServer,
    ExportParams,
    ExportResult,
    ImportParams,
    SetEnabledParams,
    Toolset,
    ToolsetDetail,
    ToolsetIdParams,
    ToolsetResult,
    ToolsetsResult,
    ToolIdParams,
    ToolResult,
    ToolsListParams,
    ToolsResult,
    ToolCall,
    ToolCallParams,
    ToolCallResult,
    HtmlPageParams,
    HtmlPageResult,
    SetOverrideParams,
    InspectedServer,
    InspectedTool,
    InspectParams,
    InspectResult,
    ManifestInfo,
)
from ..rpc import RequestContext

if TYPE_CHECKING:
    from ..app import Sidecar
    from ..toolsets.service import ToolsetRow


def toolset_out(t: ToolsetRow) -> Toolset:
    return Toolset(id=t.id, name=t.name, version=t.version, description=t.description,
                   enabled=t.enabled, user_mcp=t.user_mcp, source_type=t.source_type,  # type: ignore[arg-type]
                   installed_at=t.installed_at, source_ref=t.source_ref)


def handlers(app: Sidecar) -> dict[str, Any]:
    async def inspect(p: InspectParams, ctx: RequestContext) -> InspectResult:
        from ..toolsets import bundle, secrets  # yaml and ast: loaded on first use

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

    svc = app.toolsets

    async def import_(p: ImportParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await svc.install(p.path, replace=p.replace)))

    async def list_(p: None, ctx: RequestContext) -> ToolsetsResult:
        return ToolsetsResult([toolset_out(t) for t in await svc.list()])

    async def get(p: ToolsetIdParams, ctx: RequestContext) -> ToolsetDetail:
        from ..toolsets import registry, secrets

        toolset = await svc.get(p.id)
        servers = await svc.server_rows(p.id)
        return ToolsetDetail(
            toolset_out(toolset),
            await registry.toolset_tools(app.db, p.id),  # type: ignore[arg-type]
            [ConfiguredServer(id=f"{p.id}~{r[0]}", server_id=r[0], toolset_id=p.id, type=r[1],
                              enabled=bool(r[10]),
                              command=secrets.masked_command(r[2], json.loads(r[3])),
                              url=secrets.mask_url(r[5]) if r[5] else None)
             for r in servers],
        )

    async def export(p: ExportParams, ctx: RequestContext) -> ExportResult:
        path, size, sha = await svc.export(p.id, p.path)
        return ExportResult(str(path), size, sha)

    async def set_enabled(p: SetEnabledParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await svc.set_enabled(p.id, p.enabled)))

    async def uninstall(p: ToolsetIdParams, ctx: RequestContext) -> Empty:
        await svc.uninstall(p.id)
        return Empty()

    async def tools_list(p: ToolsListParams, ctx: RequestContext) -> ToolsResult:
        from ..toolsets import registry

        return ToolsResult(await registry.list_tools(app.db, p.include_disabled, app.mcp))  # type: ignore[arg-type]

    async def tools_get(p: ToolIdParams, ctx: RequestContext) -> ToolResult:
        from ..toolsets import registry

        return ToolResult(await registry.get_tool(app.db, p.id, app.mcp))  # type: ignore[arg-type]

    async def set_override(p: SetOverrideParams, ctx: RequestContext) -> ToolResult:
        from ..toolsets import registry

        changes = {f: getattr(p, f) for f in p.__struct_fields__
                   if f not in ("toolset_id", "tool_id") and getattr(p, f) is not msgspec.UNSET}
        return ToolResult(await registry.set_override(app.db, p.toolset_id, p.tool_id, changes, app.mcp))  # type: ignore[arg-type]

    async def call(p: ToolCallParams, ctx: RequestContext) -> ToolCallResult:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            if p.work_done_token is not None:
                value: dict[str, Any] = {"kind": "report"}
                if total:
                    value["percentage"] = min(100, int(done * 100 / total))
                if message:
                    value["message"] = message
                await ctx.progress(p.work_done_token, value)

        row = await app.tool_calls.call(p.tool_id, p.args, p.chat_id, on_progress=progress)
        return ToolCallResult(msgspec.convert(row, ToolCall, from_attributes=True))

    async def html_page(p: HtmlPageParams, ctx: RequestContext) -> HtmlPageResult:
        return HtmlPageResult(await app.tool_calls.html_page(p.tool_call_id))

    return {"tools/list": tools_list, "tools/call": call, "tools/htmlPage": html_page, "tools/get": tools_get, "tools/setOverride": set_override,
            "toolsets/inspect": inspect, "toolsets/import": import_, "toolsets/list": list_,
            "toolsets/get": get, "toolsets/export": export, "toolsets/setEnabled": set_enabled,
            "toolsets/uninstall": uninstall}
