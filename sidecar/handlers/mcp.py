"""mcpServers/*: thin adapters over the MCP-server service (`mcp_host/servers.py`)."""

from __future__ import annotations

from ..api.base import Empty
from ..api.mcp import (
    AddParams,
    GetPromptParams,
    GetPromptResult,
    ListServersParams,
    LoginParams,
    McpImportParams,
    McpImportPreviewParams,
    McpImportPreviewResult,
    McpImportResult,
    PromptsResult,
    ReadResourceParams,
    ReadResourceResult,
    ResourcesResult,
    ServerIdParams,
    ServerResult,
    ServerSetEnabledParams,
    ServersResult,
    UpdateParams,
)
from ..mcp_host.servers import McpServers
from ..rpc import RequestContext
from .routes import method


class McpHandlers:
    def __init__(self, servers: McpServers) -> None:
        self.servers = servers

    @method("mcpServers/add")
    async def add(self, p: AddParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.add(p))

    @method("mcpServers/list")
    async def list_servers(self, p: ListServersParams, ctx: RequestContext) -> ServersResult:
        return ServersResult(*await self.servers.page(p))

    @method("mcpServers/update")
    async def update(self, p: UpdateParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.update(p))

    @method("mcpServers/remove")
    async def remove(self, p: ServerIdParams, ctx: RequestContext) -> Empty:
        await self.servers.remove(p.id)
        return Empty()

    @method("mcpServers/setEnabled")
    async def set_enabled(self, p: ServerSetEnabledParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.set_enabled(p.id, p.enabled))

    @method("mcpServers/reconnect")
    async def reconnect(self, p: ServerIdParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.reconnect(p.id))

    @method("mcpServers/prepare")
    async def prepare(self, p: ServerIdParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.prepare(p.id))

    @method("mcpServers/login")
    async def login(self, p: LoginParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.login(p.id, p.client))

    @method("mcpServers/logout")
    async def logout(self, p: ServerIdParams, ctx: RequestContext) -> ServerResult:
        return ServerResult(await self.servers.logout(p.id))

    @method("mcpServers/resources")
    async def resources(self, p: ServerIdParams, ctx: RequestContext) -> ResourcesResult:
        return ResourcesResult(await self.servers.resources(p.id))

    @method("mcpServers/readResource")
    async def read_resource(self, p: ReadResourceParams, ctx: RequestContext) -> ReadResourceResult:
        got = await self.servers.read_resource(p.id, p.uri)
        return ReadResourceResult(got.get("contents", []))

    @method("mcpServers/prompts")
    async def prompts(self, p: ServerIdParams, ctx: RequestContext) -> PromptsResult:
        return PromptsResult(await self.servers.prompts(p.id))

    @method("mcpServers/getPrompt")
    async def get_prompt(self, p: GetPromptParams, ctx: RequestContext) -> GetPromptResult:
        got = await self.servers.get_prompt(p.id, p.name, p.arguments)
        return GetPromptResult(got.get("messages", []), got.get("description"))

    @method("mcpServers/importPreview")
    async def import_preview(self, p: McpImportPreviewParams, ctx: RequestContext) -> McpImportPreviewResult:
        found, skipped, warnings = await self.servers.preview_import(p.path, p.project)
        return McpImportPreviewResult(found, skipped, warnings)

    @method("mcpServers/import")
    async def import_(self, p: McpImportParams, ctx: RequestContext) -> McpImportResult:
        added, skipped, renamed = await self.servers.import_(p)
        return McpImportResult(added, skipped, renamed)
