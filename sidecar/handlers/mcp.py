"""mcpServers/*: stored server rows and live connection states, joined for the UI."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .. import secrets
from ..api.base import Empty
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
    ServerSetEnabledParams,
    ServersResult,
)
from ..errors import Conflict, InvalidParams, NotFound, UpstreamError
from ..mcp_host.host import McpError, McpHost
from ..rpc import RequestContext
from ..store import Database
from ..toolsets import mcp_servers
from ..toolsets.mcp_servers import ServerRow
from ..toolsets.service import ToolsetService
from .routes import method


def server_out(row: ServerRow, mcp: McpHost) -> McpServer:
    try:
        state = mcp.state(row.key)
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


class McpHandlers:
    def __init__(self, toolsets: ToolsetService, mcp: McpHost, db: Database,
                 sync: Callable[[], Awaitable[None]]) -> None:
        self.toolsets = toolsets
        self.mcp = mcp
        self.db = db
        self.sync = sync

    async def connected(self, ref: str) -> ServerRow:
        row = await mcp_servers.find(self.db, ref)
        if server_out(row, self.mcp).status != "connected":
            raise Conflict("not connected", f"the MCP server {row.key} is not connected; see mcpServers/list")
        return row

    @staticmethod
    async def upstream(call: Any, row: ServerRow) -> Any:
        try:
            return await call
        except McpError as exc:
            raise UpstreamError("mcp", exc.message, row.key) from None

    @method("mcpServers/add")
    async def add(self, p: AddParams, ctx: RequestContext) -> ServerResult:
        toolset = await self.toolsets.add_user_server(_declaration(p))
        return ServerResult(server_out(await mcp_servers.find(self.db, f"{toolset.id}~{toolset.id}"), self.mcp))

    @method("mcpServers/list")
    async def list_servers(self, p: None, ctx: RequestContext) -> ServersResult:
        return ServersResult([server_out(r, self.mcp) for r in await mcp_servers.all_servers(self.db)])

    @method("mcpServers/remove")
    async def remove(self, p: ServerIdParams, ctx: RequestContext) -> Empty:
        row = await mcp_servers.find(self.db, p.id)
        if not row.user_mcp:
            raise Conflict("declared by a toolset",
                           f"{row.key} comes with the toolset {row.toolset_id!r}: turn it off with "
                           "mcpServers/setEnabled, or uninstall the toolset")
        await self.toolsets.uninstall(row.toolset_id)
        return Empty()

    @method("mcpServers/setEnabled")
    async def set_enabled(self, p: ServerSetEnabledParams, ctx: RequestContext) -> ServerResult:
        row = await mcp_servers.set_enabled(self.db, await mcp_servers.find(self.db, p.id), p.enabled)
        await self.sync()
        return ServerResult(server_out(row, self.mcp))

    @method("mcpServers/reconnect")
    async def reconnect(self, p: ServerIdParams, ctx: RequestContext) -> ServerResult:
        row = await mcp_servers.find(self.db, p.id)
        if not row.should_run:
            raise Conflict("disabled", f"{row.key} is turned off; enable it with mcpServers/setEnabled")
        await self.mcp.reconnect(row.key)
        return ServerResult(server_out(row, self.mcp))

    @method("mcpServers/resources")
    async def resources(self, p: ServerIdParams, ctx: RequestContext) -> ResourcesResult:
        row = await self.connected(p.id)
        return ResourcesResult(await self.upstream(self.mcp.list_resources(row.key), row))

    @method("mcpServers/readResource")
    async def read_resource(self, p: ReadResourceParams, ctx: RequestContext) -> ReadResourceResult:
        row = await self.connected(p.id)
        got = await self.upstream(self.mcp.read_resource(row.key, p.uri), row)
        return ReadResourceResult(got.get("contents", []))

    @method("mcpServers/prompts")
    async def prompts(self, p: ServerIdParams, ctx: RequestContext) -> PromptsResult:
        row = await self.connected(p.id)
        return PromptsResult(await self.upstream(self.mcp.list_prompts(row.key), row))

    @method("mcpServers/getPrompt")
    async def get_prompt(self, p: GetPromptParams, ctx: RequestContext) -> GetPromptResult:
        row = await self.connected(p.id)
        got = await self.upstream(self.mcp.get_prompt(row.key, p.name, p.arguments), row)
        return GetPromptResult(got.get("messages", []), got.get("description"))

    @method("mcpServers/importPreview")
    async def import_preview(self, p: McpImportPreviewParams, ctx: RequestContext) -> McpImportPreviewResult:
        found, warnings = await _found(p.path)
        existing = {t.id for t in await self.toolsets.all()}
        return McpImportPreviewResult([_found_out(f, f.id in existing) for f in found], warnings)

    @method("mcpServers/import")
    async def import_(self, p: McpImportParams, ctx: RequestContext) -> McpImportResult:
        found, _ = await _found(p.path)
        by_id = {f.id: f for f in found}
        for i, wanted in enumerate(p.ids):
            if wanted not in by_id:
                raise InvalidParams(f"params.ids[{i}]", f"no server {wanted!r} was found; run mcpServers/importPreview")
        added = []
        for wanted in dict.fromkeys(p.ids):
            f = by_id[wanted]
            toolset = await self.toolsets.add_user_server({
                "id": f.id, "type": f.type, "command": f.command, "args": f.args, "env": f.env, "cwd": f.cwd,
                "url": f.url, "headers": f.headers})
            added.append(server_out(await mcp_servers.find(self.db, f"{toolset.id}~{toolset.id}"), self.mcp))
        return McpImportResult(added)



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
    return FoundServer(id=f.id, source=f.source, path=f.path, type=f.type,
                       command=secrets.masked_command(f.command, f.args),
                       url=secrets.mask_url(f.url) if f.url else None, env_keys=sorted(f.env),
                       exists=exists, warnings=f.warnings)
