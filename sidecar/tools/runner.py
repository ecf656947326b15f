"""One interface for running a tool, whichever provider it comes from: the call path
(``calls.py``) resolves the tool once through the catalog and hands it to the runner of its
provider, once. The runners live with their providers (``providers/``) and are wired in
``compose.py``, one per provider name.

A runner runs the tool and returns its result, or raises ``ToolFailed``. What a provider needs
around the run, it declares here rather than the call path asking which provider it is:
``scratch`` (a folder of its own as cwd outside a chat) and ``plan`` (how a result is shown when
the tool names no renderer).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..api.tool_calls import ClientContext
from .resolved import Resolved

# (progress, total or None, message or None) as a tool reports it.
OnProgress = Callable[[float, "float | None", "str | None"], Awaitable[None]]


@dataclass(slots=True)
class Run:
    """One call's inputs beyond the tool itself."""

    args: dict[str, Any]
    chat_id: str | None
    call_id: str
    settings: dict[str, Any] | None  # the tool's config values, secret ones included
    client_context: ClientContext | None = None  # what the UI said of the user's time and place
    on_progress: OnProgress | None = None
    raw: bool = False  # the result may stay as the JSON it came as (``msgspec.Raw``)
    workspace: Path | None = None  # the chat's folder, or a scratch one; set once it is ready
    sent: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # an HTTP tool's requests

    def secret_values(self, target: Resolved) -> list[str]:
        """The values of the tool's secret settings: masked wherever a result or error quotes one."""
        keys = target.settings.secrets if target.settings is not None else {}
        return [v for k, v in (self.settings or {}).items() if k in keys and isinstance(v, str)]


class ToolFailed(Exception):
    """The tool ran and failed; ``kind`` is the record's ``error_kind``, ``result`` what it left."""

    def __init__(self, message: str, kind: str, result: Any = None) -> None:
        super().__init__(message)
        self.message, self.kind, self.result = message, kind, result


class ToolRunner(Protocol):
    """Runs the tools of one provider (runners subclass this to inherit the defaults)."""

    # A call outside a chat still gets a folder of its own as cwd (Python workers); else none.
    scratch: bool = False

    async def run(self, target: Resolved, call: Run) -> Any:
        """The tool's result (``msgspec.Raw`` allowed when ``call.raw``); ``ToolFailed`` when it failed."""
        ...

    def plan(self, result: Any) -> dict[str, Any] | None:
        """The render plan of a successful result when the tool names no renderer (None: none)."""
        return None
