"""Which handler class serves which area, and which services each one gets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .authoring import AuthoringHandlers
from .bundles import BundleHandlers
from .chats import ChatHandlers
from .config import ConfigHandlers
from .debug import DebugHandlers
from .limits import LimitHandlers
from .mcp import McpHandlers
from .providers import ProviderHandlers
from .routes import routes
from .schedules import ScheduleHandlers
from .search import SearchHandlers
from .secrets import SecretHandlers
from .settings import SettingsHandlers
from .tool_calls import ToolCallHandlers
from .toolsets import ToolsetHandlers
from .workspace import WorkspaceHandlers

if TYPE_CHECKING:
    from ..compose import Services

AREAS = (AuthoringHandlers, BundleHandlers, ChatHandlers, ConfigHandlers, DebugHandlers, LimitHandlers, McpHandlers,
         ProviderHandlers, ScheduleHandlers, SearchHandlers, SecretHandlers, SettingsHandlers, ToolCallHandlers,
         ToolsetHandlers,
         WorkspaceHandlers)


def service_routes(s: Services) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for area in (
        AuthoringHandlers(s.user_toolsets, s.catalog),
        BundleHandlers(s.toolsets, s.bundles, s.catalog, s.mcp_servers),
        ChatHandlers(s.chats, s.turns, s.workspace, s.tool_calls.repo),
        ConfigHandlers(s.config),
        DebugHandlers(s.settings, s.db, s.started_at, s.secrets, s.switch, s.sandbox),
        LimitHandlers(s.catalog),
        McpHandlers(s.mcp_servers),
        ProviderHandlers(s.providers),
        ScheduleHandlers(s.schedules),
        SearchHandlers(s.search),
        SecretHandlers(s.secrets, s.mcp_servers, s.providers),
        SettingsHandlers(s.switch),
        ToolCallHandlers(s.audit),
        ToolsetHandlers(s.toolsets, s.tool_calls, s.catalog, s.chats, s.listing, s.switch),
        WorkspaceHandlers(s.workspace, s.chats),
    ):
        for name, handler in routes(area).items():
            if name in found:
                raise RuntimeError(f"{name!r} is served by two areas")
            found[name] = handler
    return found
