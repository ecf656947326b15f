"""Per-call context. A ContextVar rather than a global so concurrent async tools each see their
own call, and code the tool hands to ``contextvars.copy_context().run`` inherits it."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

# What ``telemetry`` always holds (seed 004): each key present, None when the app did not say.
TELEMETRY_FIELDS = ("time", "timezone", "locale", "language", "lat", "lon", "city", "country")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """``settings``: the tool's configuration (its toolset's fields, then its own; defaults filled,
    secret values included: keep them out of results and prints). ``telemetry``: the user's time,
    time zone, locale and, when the app shares it, location."""

    workspace: Path
    chat_id: str | None
    toolset_id: str
    toolset_dir: Path
    tool_call_id: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    telemetry: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Callers build this from JSON, where paths arrive as strings.
        object.__setattr__(self, "workspace", Path(self.workspace))
        object.__setattr__(self, "toolset_dir", Path(self.toolset_dir))
        # Read-only views: one call's tool cannot change what the next call is given.
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        telemetry = {name: None for name in TELEMETRY_FIELDS} | dict(self.telemetry)
        object.__setattr__(self, "telemetry", MappingProxyType(telemetry))


_current: ContextVar[ToolContext | None] = ContextVar("covalt_toolset.context", default=None)


def get_context() -> ToolContext:
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError(
            "covalt_toolset.get_context() was called outside a tool call: it only works while the "
            "sidecar runs a tool (or in code the tool runs via contextvars.copy_context())"
        )
    return ctx


def set_context(ctx: ToolContext) -> Token[ToolContext | None]:
    if not isinstance(ctx, ToolContext):
        raise TypeError(f"set_context() expects a ToolContext, got {type(ctx).__name__}")
    return _current.set(ctx)


def clear_context(token: Token[ToolContext | None] | None = None) -> None:
    if token is None:
        _current.set(None)
        return
    try:
        _current.reset(token)
    except ValueError:
        # The token belongs to another Context (e.g. set in a task, cleared elsewhere); clearing
        # is still what the caller wants.
        _current.set(None)
