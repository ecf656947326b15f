from __future__ import annotations

from typing import Any

import msgspec

from .. import secrets
from ..api.base import Empty
from ..api.tool_calls import ToolCall, ToolCallParams, ToolCallResult
from ..api.tools import SetOverrideParams, SetOverrideResult, ToolIdParams, ToolResult, ToolsListParams, ToolsResult
from ..api.toolsets import (
    ConfiguredServer,
    ExportParams,
    ExportResult,
    HtmlPageParams,
    HtmlPageResult,
    InspectParams,
    InspectResult,
    ListToolsetsParams,
    SetEnabledParams,
    Toolset,
    ToolsetDetail,
    ToolsetIdParams,
    ToolsetResult,
    ToolsetsResult,
)
from ..chat import toolbox
from ..chat.chats import ChatService
from ..errors import InvalidParams
from ..rpc import RequestContext, Verbatim
from ..store.tool_calls import API
from ..store.toolsets import ToolsetRow
from ..tools.calls import ToolCallService
from ..tools.catalog import Catalog
from ..tools.listing import ToolListing
from ..tools.overrides import is_pattern
from ..tools.runner import OnProgress
from ..tools.switch import ToolSwitch
from ..toolsets.service import ToolsetService
from .routes import method


def toolset_out(t: ToolsetRow) -> Toolset:
    return Toolset(id=t.id, name=t.name, version=t.version, description=t.description,
                   enabled=t.enabled, user_mcp=t.user_mcp, source_type=t.source_type,
                   installed_at=t.installed_at, source_ref=t.source_ref, soft_deleted_at=t.soft_deleted_at,
                   created_at=t.installed_at, modified_at=t.modified_at or t.installed_at)


class ToolsetHandlers:
    def __init__(self, toolsets: ToolsetService, tool_calls: ToolCallService, catalog: Catalog,
                 chats: ChatService, listing: ToolListing, switch: ToolSwitch) -> None:
        self.toolsets = toolsets
        self.listing = listing  # tools/list pages and usage
        self.tool_calls = tool_calls
        self.switch = switch  # off: a chat's turn offers no tools
        self.catalog = catalog
        self.chats = chats

    @method("toolsets/inspect")
    async def inspect(self, p: InspectParams, ctx: RequestContext) -> InspectResult:
        return await self.toolsets.inspect(p.path)

    @method("toolsets/list")
    async def list_toolsets(self, p: ListToolsetsParams, ctx: RequestContext) -> ToolsetsResult:
        rows, token = await self.toolsets.page(p)
        return ToolsetsResult([toolset_out(t) for t in rows], token)

    @method("toolsets/get")
    async def get(self, p: ToolsetIdParams, ctx: RequestContext) -> ToolsetDetail:
        toolset = await self.toolsets.get(p.id)
        servers = await self.toolsets.server_rows(p.id)
        return ToolsetDetail(
            toolset_out(toolset),
            await self.catalog.toolset_tools(p.id),
            [ConfiguredServer(id=r.key, server_id=r.server_id, toolset_id=p.id, type=r.type,
                              enabled=r.enabled,
                              command=secrets.masked_command(r.command, r.args),
                              url=secrets.mask_url(r.url) if r.url else None,
                              sandbox=r.sandbox if r.type == "stdio" else None)
             for r in servers],
        )

    @method("toolsets/export")
    async def export(self, p: ExportParams, ctx: RequestContext) -> ExportResult:
        path, size, sha, variables = await self.toolsets.export(p.id, p.path)
        return ExportResult(str(path), size, sha, variables)

    @method("toolsets/setEnabled")
    async def set_enabled(self, p: SetEnabledParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.toolsets.set_enabled(p.id, p.enabled)))

    @method("toolsets/delete")
    async def soft_delete(self, p: ToolsetIdParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.toolsets.soft_delete(p.id)))

    @method("toolsets/restore")
    async def restore(self, p: ToolsetIdParams, ctx: RequestContext) -> ToolsetResult:
        return ToolsetResult(toolset_out(await self.toolsets.restore(p.id)))

    @method("toolsets/uninstall")
    async def uninstall(self, p: ToolsetIdParams, ctx: RequestContext) -> Empty:
        await self.toolsets.uninstall(p.id)
        return Empty()

    @method("tools/list")
    async def tools_list(self, p: ToolsListParams, ctx: RequestContext) -> ToolsResult:
        if p.chat_id is None:
            return await self.listing.page(p)
        if p.page_token is not None or p.toolset_ids is not None or p.tags is not None:
            raise InvalidParams("params.chatId", "a chat's tools come whole, unpaged and unfiltered; leave out "
                                                 "pageToken, toolsetIds and tags with chatId")
        if not self.switch.enabled:
            await self.chats.require(p.chat_id)  # an unknown chat is still NotFound
            return ToolsResult([])  # a turn offers none
        return ToolsResult((await toolbox.for_chat(self.chats, self.catalog, p.chat_id)).shown())

    @method("tools/get")
    async def tools_get(self, p: ToolIdParams, ctx: RequestContext) -> ToolResult:
        return ToolResult(await self.listing.get(p.id))

    @method("tools/setOverride")
    async def set_override(self, p: SetOverrideParams, ctx: RequestContext) -> SetOverrideResult:
        if is_pattern(p.tool_id):
            return SetOverrideResult(matched=await self.catalog.set_pattern_override(p.toolset_id, p.tool_id,
                                                                                     _changes(p)))
        return SetOverrideResult(await self.catalog.set_override(p.toolset_id, p.tool_id, _changes(p)))

    @method("tools/call")
    async def call(self, p: ToolCallParams, ctx: RequestContext) -> ToolCallResult:
        progress = _reporter(ctx, p.work_done_token) if p.work_done_token is not None else None
        # The id or what the palette gives ("+slug" / "+slug@version"), resolved by the call.
        row = await self.tool_calls.call(p.tool_id, p.args, p.chat_id, on_progress=progress, raw_result=True,
                                         client_context=p.client_context, origin=API)
        call = msgspec.convert(row, ToolCall, from_attributes=True)
        if isinstance(call.result, msgspec.Raw):
            call.result = Verbatim(call.result)  # a big one is sent as it is, never copied on the loop
        return ToolCallResult(call)

    @method("tools/htmlPage")
    async def html_page(self, p: HtmlPageParams, ctx: RequestContext) -> HtmlPageResult:
        return HtmlPageResult(await self.tool_calls.html_page(p.tool_call_id))



def _changes(p: SetOverrideParams) -> dict[str, Any]:
    """The fields the request sets (null included: it clears that field)."""
    return {f: getattr(p, f) for f in p.__struct_fields__
            if f not in ("toolset_id", "tool_id") and getattr(p, f) is not msgspec.UNSET}


def _reporter(ctx: RequestContext, token: int | str) -> OnProgress:
    """A tool's progress (as MCP reports it) as ``$/progress`` reports under the caller's token."""
    async def progress(done: float, total: float | None, message: str | None) -> None:
        value: dict[str, Any] = {"kind": "report"}
        if total:
            value["percentage"] = min(100, int(done * 100 / total))
        if message:
            value["message"] = message
        await ctx.progress(token, value)

    return progress
