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
        return await self.audit.export(p)
