"""mcpServers/*: stored server rows and live connection states, joined for the UI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api.base import Empty
from ..api.errors import Conflict, InvalidParams, NotFound, UpstreamError
from ..api.mcp import (
    AddParams,
    FoundServer,
    GetPromptParams,
    GetPromptResult,
    McpImportParams,
    McpImportPreviewParams,
    McpImportPreviewResult,
    McpImportResult,
    McpServer,
    PromptsResult,
    ReadResourceParams,
    ReadResourceResult,
    ResourcesResult,
    ServerIdParams,
    ServerResult,
    ServersResult,
    ServerSetEnabledParams,
)
from ..rpc import RequestContext

if TYPE_CHECKING:
    from ..app import Sidecar
    from ..toolsets.mcp_servers import ServerRow


def server_out(row: ServerRow, app: Sidecar) -> McpServer:
    from ..toolsets import secrets

    try:
        state = app.mcp.state(row.key)
        status, error, tools, name = state.status, state.error, state.tool_count, state.server_name
    except KeyError:  # not handed to the host yet (added a moment ago)
        status, error, tools, name = ("connecting" if row.should_run else "disabled"), None, 0, None
    return McpServer(
        id=row.key, server_id=row.server_id, toolset_id=row.toolset_id, type=row.type,  # type: ignore[arg-type]
        status=status, enabled=row.should_run, tool_count=tools, error=error, user_mcp=row.user_mcp,
        command=secrets.masked_command(row.command, row.args),
        url=secrets.mask_url(row.url) if row.url else None, server_name=name,
        requires_confirmation=row.requires_confirmation,
    )


def handlers(app: Sidecar) -> dict[str, Any]:
    from ..toolsets import mcp_servers

    async def connected(ref: str) -> ServerRow:
        row = await mcp_servers.find(app.db, ref)
        if server_out(row, app).status != "connected":
            raise Conflict("not connected", f"the MCP server {row.key} is not connected; see mcpServers/list")
        return row

    async def upstream(call: Any, row: ServerRow) -> Any:
        from ..mcp_host.host import McpError

        try:
            return await call
        except McpError as exc:
            raise UpstreamError("mcp", exc.message, row.key) from None

    async def add(p: AddParams, ctx: RequestContext) -> ServerResult:
        toolset = await app.toolsets.add_user_server(_declaration(p))
        return ServerResult(server_out(await mcp_servers.find(app.db, f"{toolset.id}~{toolset.id}"), app))

    async def list_(p: None, ctx: RequestContext) -> ServersResult:
        return ServersResult([server_out(r, app) for r in await mcp_servers.all_servers(app.db)])

    async def remove(p: ServerIdParams, ctx: RequestContext) -> Empty:
        row = await mcp_servers.find(app.db, p.id)
        if not row.user_mcp:
            raise Conflict("declared by a toolset",
                           f"{row.key} comes with the toolset {row.toolset_id!r}: turn it off with "
                           "mcpServers/setEnabled, or uninstall the toolset")
        await app.toolsets.uninstall(row.toolset_id)
        return Empty()

    async def set_enabled(p: ServerSetEnabledParams, ctx: RequestContext) -> ServerResult:
        row = await mcp_servers.set_enabled(app.db, await mcp_servers.find(app.db, p.id), p.enabled)
        await app.sync_mcp()
        return ServerResult(server_out(row, app))

    async def reconnect(p: ServerIdParams, ctx: RequestContext) -> ServerResult:
        row = await mcp_servers.find(app.db, p.id)
        if not row.should_run:
            raise Conflict("disabled", f"{row.key} is turned off; enable it with mcpServers/setEnabled")
        await app.mcp.reconnect(row.key)
        return ServerResult(server_out(row, app))

    async def resources(p: ServerIdParams, ctx: RequestContext) -> ResourcesResult:
        row = await connected(p.id)
        return ResourcesResult(await upstream(app.mcp.list_resources(row.key), row))

    async def read_resource(p: ReadResourceParams, ctx: RequestContext) -> ReadResourceResult:
        row = await connected(p.id)
        got = await upstream(app.mcp.read_resource(row.key, p.uri), row)
        return ReadResourceResult(got.get("contents", []))

    async def prompts(p: ServerIdParams, ctx: RequestContext) -> PromptsResult:
        row = await connected(p.id)
        return PromptsResult(await upstream(app.mcp.list_prompts(row.key), row))

    async def get_prompt(p: GetPromptParams, ctx: RequestContext) -> GetPromptResult:
        row = await connected(p.id)
        got = await upstream(app.mcp.get_prompt(row.key, p.name, p.arguments), row)
        return GetPromptResult(got.get("messages", []), got.get("description"))

    async def import_preview(p: McpImportPreviewParams, ctx: RequestContext) -> McpImportPreviewResult:
        found, warnings = await _found(p.path)
        existing = {t.id for t in await app.toolsets.list()}
        return McpImportPreviewResult([_found_out(f, f.id in existing) for f in found], warnings)

    async def import_(p: McpImportParams, ctx: RequestContext) -> McpImportResult:
        found, _ = await _found(p.path)
        by_id = {f.id: f for f in found}
        for i, wanted in enumerate(p.ids):
            if wanted not in by_id:
                raise InvalidParams(f"params.ids[{i}]", f"no server {wanted!r} was found; run mcpServers/importPreview")
        added = []
        for wanted in dict.fromkeys(p.ids):
            f = by_id[wanted]
            toolset = await app.toolsets.add_user_server({
                "id": f.id, "type": f.type, "command": f.command, "args": f.args, "env": f.env, "cwd": f.cwd,
                "url": f.url, "headers": f.headers})
            added.append(server_out(await mcp_servers.find(app.db, f"{toolset.id}~{toolset.id}"), app))
        return McpImportResult(added)

    return {"mcpServers/add": add, "mcpServers/list": list_, "mcpServers/remove": remove,
            "mcpServers/setEnabled": set_enabled, "mcpServers/reconnect": reconnect,
            "mcpServers/resources": resources, "mcpServers/readResource": read_resource,
            "mcpServers/prompts": prompts, "mcpServers/getPrompt": get_prompt,
            "mcpServers/importPreview": import_preview, "mcpServers/import": import_}


def _declaration(p: AddParams) -> dict[str, Any]:
    """mcpServers/add params as a manifest's mcp_servers entry (checked the same way)."""
    return {
        "id": p.id, "type": p.type, "command": p.command, "args": p.args, "env": p.env, "cwd": p.cwd,
        "url": p.url, "headers": p.headers, "requires_confirmation": p.requires_confirmation,
        "connect_timeout": p.connect_timeout, "call_timeout": p.call_timeout}


async def _found(path: str | None) -> tuple[list[Any], list[str]]:
    import anyio.to_thread

    from ..mcp_host import app_configs

    if path is not None and not Path(path).is_absolute():
        raise InvalidParams("params.path", "give an absolute path")
    try:
        return await anyio.to_thread.run_sync(app_configs.discover, Path(path) if path else None)
    except FileNotFoundError:
        raise NotFound("file", str(path)) from None
    except app_configs.ConfigError as exc:
        raise InvalidParams("params.path", str(exc)) from None


def _found_out(f: Any, exists: bool) -> FoundServer:
    from ..toolsets import secrets

    return FoundServer(id=f.id, source=f.source, path=f.path, type=f.type,
                       command=secrets.masked_command(f.command, f.args),
                       url=secrets.mask_url(f.url) if f.url else None, env_keys=sorted(f.env),
                       exists=exists, warnings=f.warnings)
