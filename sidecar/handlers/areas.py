"""Which handler class serves which area. Which services each one gets is ``compose.service_routes``:
compose builds the services, and handlers sit below it."""

from __future__ import annotations

from .authoring import AuthoringHandlers
from .bundles import BundleHandlers
from .chats import ChatHandlers
from .config import ConfigHandlers
from .debug import DebugHandlers
from .limits import LimitHandlers
from .mcp import McpHandlers
from .providers import ProviderHandlers
from .relevance import RelevanceHandlers
from .schedules import ScheduleHandlers
from .search import SearchHandlers
from .secrets import SecretHandlers
from .settings import SettingsHandlers
from .tool_calls import ToolCallHandlers
from .toolsets import ToolsetHandlers
from .workspace import WorkspaceHandlers

AREAS = (AuthoringHandlers, BundleHandlers, ChatHandlers, ConfigHandlers, DebugHandlers, LimitHandlers, McpHandlers,
         ProviderHandlers, RelevanceHandlers, ScheduleHandlers, SearchHandlers, SecretHandlers, SettingsHandlers,
         ToolCallHandlers,
         ToolsetHandlers,
         WorkspaceHandlers)
