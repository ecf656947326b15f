"""The MCP tools' runner: a call on the live connection to the tool's server (``mcp_host``); a
result the server marks ``isError`` fails the call, and one without a renderer is shown by its
content (``mcp_plans``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import McpError
from ...mcp_host.state import CallOrigin
from .. import mcp_plans
from ..resolved import McpConfig, Resolved
from ..runner import Run, ToolFailed, ToolRunner

if TYPE_CHECKING:
    from ...mcp_host.host import McpHost


class McpRunner(ToolRunner):
    def __init__(self, host: McpHost) -> None:
        self.host = host

    async def run(self, target: Resolved, call: Run) -> Any:
        config = target.config
        assert isinstance(config, McpConfig)
        try:
            result = await self.host.call_tool(config.server_key, config.tool_name, call.args,
                                               on_progress=call.on_progress,
                                               origin=CallOrigin(call.chat_id, call.call_id))
        except McpError as exc:
            raise ToolFailed(exc.message, exc.kind) from None
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
            raise ToolFailed(text.strip() or "the MCP server reported an error", "server", result)
        return result

    def plan(self, result: Any) -> dict[str, Any] | None:
        return mcp_plans.default_plan(result)  # by content (an override may set a renderer instead)
