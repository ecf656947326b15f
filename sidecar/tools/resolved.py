"""What resolving a tool id gives the call path, whichever provider the tool comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..api.toolsets import Tool
from ..sandbox.policy import Confinement

if TYPE_CHECKING:
    from .settings import Plan


@dataclass(frozen=True)
class Resolved:
    """What it takes to run a tool: its public view plus where its code lives."""

    tool: Tool
    entrypoint: str | None  # importable in the toolset's worker: "tools.module:function"
    config: dict[str, Any]  # timeout, needs_workspace, default renderer of built-ins; MCP: server_key, tool_name
    toolset_dir: str | None
    # The tool's own switch (or its override) is on. ``tool.enabled`` also needs its toolset on;
    # a chat that attached the toolset may run its tools anyway, never one switched off itself.
    switched_on: bool = True
    # A Python tool's settings short of the secret values, and the required keys without one.
    settings: Plan | None = None
    # What its process may do (tools/limits.py): Python tools and run_command; None for the others.
    confinement: Confinement | None = None
