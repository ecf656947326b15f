"""Service events become UI notifications and ``ui/`` requests here, and nowhere else.

Services are handed these methods (through ``compose``) as plain callbacks; they never see the
connection.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..api.chats import ChatEventParams, ConfirmToolCallParams, ConfirmToolCallResult
from ..api.lifecycle import SandboxCapability, SandboxChangedParams
from ..api.mcp import (
    ElicitParams,
    ElicitResult,
    McpServer,
    OpenUrlParams,
    OpenUrlResult,
    ServerLogParams,
    ServerStatusParams,
)
from ..api.schedules import FiredParams
from ..api.settings import SettingsChangedParams, UserSettings
from ..api.toolsets import ToolsetChangedParams
from ..api.workspace import ChangedParams, Changes
from ..mcp_host.elicitation import ElicitAnswer, Elicitation, InvalidAnswer
from ..mcp_host.logs import ServerLog
from ..rpc.errors import InvalidResponse, RemoteError
from ..sandbox.detect import Detected
from ..secrets import clean
from ..store.toolsets import ToolsetRow
from .toolsets import toolset_out


class Peer(Protocol):
    """The UI end of the connection."""

    async def notify(self, method: str, params: Any = None) -> None: ...
    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any: ...


class Notifier:
    def __init__(self, peer: Peer) -> None:
        self._peer = peer

    async def workspace_changed(
        self, chat_id: str, manifest_id: str, changes: tuple[list[str], list[str], list[str]]
    ) -> None:
        added, removed, modified = changes
        await self._peer.notify("workspace/changed",
                                ChangedParams(chat_id, manifest_id, Changes(added, removed, modified)))

    async def workspace_unversioned(self, chat_id: str, manifest_id: str, paths: list[str]) -> None:
        await self._peer.notify("workspace/changed",
                                ChangedParams(chat_id, manifest_id, Changes([], [], []), paths))

    async def mcp_server_changed(self, server: McpServer) -> None:
        await self._peer.notify("mcpServers/status", ServerStatusParams(server))

    async def mcp_log(self, entry: ServerLog) -> None:
        await self._peer.notify("mcpServers/log", ServerLogParams(entry.server, entry.level,
                                                                  entry.data, entry.logger, entry.dropped))

    async def toolset_reloaded(self, toolset: ToolsetRow) -> None:
        await self._peer.notify("toolsets/changed", ToolsetChangedParams(toolset.id, "reloaded", toolset_out(toolset)))

    async def toolset_reload_failed(self, toolset_id: str, path: str, reason: str) -> None:
        reason = clean(reason)  # it may quote the edited manifest or a module's error, secrets and all
        await self._peer.notify("toolsets/changed", ToolsetChangedParams(
            toolset_id, "reloadFailed", error=f"{path}: {reason}" if path else reason, error_path=path or None))

    async def settings_changed(self, settings: UserSettings, changed: list[str]) -> None:
        await self._peer.notify("settings/changed", SettingsChangedParams(settings, changed))

    async def sandbox_changed(self, found: Detected) -> None:
        await self._peer.notify("sandbox/changed", SandboxChangedParams(
            SandboxCapability(mechanism=found.mechanism, confined=found.confined), found.warning))

    async def schedule_fired(self, params: FiredParams) -> None:
        await self._peer.notify("schedules/fired", params)

    async def chat_event(self, params: ChatEventParams) -> None:
        """A turn no request of the UI started (a schedule's) streams as chat/send's does."""
        await self._peer.notify("chat/event", params)

    async def confirm_tool_call(self, params: ConfirmToolCallParams) -> ConfirmToolCallResult:
        return await self._peer.request("ui/confirmToolCall", params, ConfirmToolCallResult)

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        """`ui/elicit`: the user's answer to an MCP server's question. A malformed answer is `InvalidAnswer`."""
        try:
            answer = await self._peer.request("ui/elicit", elicit_params(request), ElicitResult)
        except InvalidResponse as exc:
            raise InvalidAnswer(exc.message) from None
        return ElicitAnswer(answer.action, answer.content)


    async def open_url(self, server: str, url: str, reason: str) -> bool:
        """`ui/openUrl`: whether the UI opened the page (an error or a malformed answer counts as no)."""
        try:
            answer = await self._peer.request("ui/openUrl", OpenUrlParams(url, reason, server), OpenUrlResult)
        except RemoteError:
            return False
        return bool(answer.opened)


def elicit_params(request: Elicitation) -> ElicitParams:
    origin = request.origin
    return ElicitParams(
        server=request.key, message=request.message, mode=request.mode, requested_schema=request.requested_schema,
        url=request.url, elicitation_id=request.elicitation_id,
        chat_id=origin.chat_id if origin is not None and origin.chat_id else request.chat_id,
        tool_call_id=origin.tool_call_id if origin is not None else None)
