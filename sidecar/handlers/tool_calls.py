"""toolCalls/*: the audit trail, listed and exported."""

from __future__ import annotations

from ..api.tool_calls import ExportToolCallsParams, ExportToolCallsResult, ListToolCallsParams, ToolCallsResult
from ..rpc import RequestContext
from ..tools.audit import AuditTrail
from .routes import method


class ToolCallHandlers:
    def __init__(self, audit: AuditTrail) -> None:
        self.audit = audit

    @method("toolCalls/list")
    async def list(self, p: ListToolCallsParams, ctx: RequestContext) -> ToolCallsResult:
        return await self.audit.list(p)

    @method("toolCalls/export")
    async def export(self, p: ExportToolCallsParams, ctx: RequestContext) -> ExportToolCallsResult:
        token = p.work_done_token
        if token is None:
            return await self.audit.export(p)

        async def progress(done: int, total: int) -> None:
            await ctx.progress(token, {"kind": "report", "percentage": done * 100 // total,
                                       "message": f"{done} of {total} calls"})

        await ctx.progress(token, {"kind": "begin", "title": "exporting tool calls", "percentage": 0})
        try:
            return await self.audit.export(p, progress)
        finally:
            await ctx.progress(token, {"kind": "end"})
