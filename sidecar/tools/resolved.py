"""What resolving a tool id gives the call path, whichever provider the tool comes from: the tool
as the UI sees it, and the typed configuration its provider's runner needs (decoded once, where
the catalog resolves a row or a live MCP tool, never on each call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..api.tools import Tool
from ..sandbox.policy import Confinement
from .output import OutputDecl

if TYPE_CHECKING:
    from .settings import Plan


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What every tool's call needs whatever runs it; as it is, the configuration of a tool whose
    provider nothing here runs (its call fails saying so)."""

    output: OutputDecl = msgspec.field(default_factory=OutputDecl)  # seed 004 ``output``: card, max_chars...
    needs_workspace: bool = False  # it works on a chat's files: a call outside a chat is refused


class BuiltinConfig(RunConfig, frozen=True, kw_only=True):
    timeout: float | None = None  # seconds; None: the default
    confinement: Confinement | None = None  # what a process it starts may do (run_command)


class PythonConfig(RunConfig, frozen=True, kw_only=True):
    entrypoint: str  # importable in the toolset's worker: "tools.module:function" ("" when it has none)
    confinement: Confinement | None = None  # the worker's limits (tools/limits.py), its timeout among them


class HttpConfig(RunConfig, frozen=True, kw_only=True):
    # The declaration as stored (an HttpSpec as data, camelCase): the runner prepares it once per
    # change, and says so on the call when a database edited by hand holds a broken one.
    http: dict[str, Any] | None = None
    timeout: float | None = None  # the whole call, retries included; None: the default


class McpConfig(RunConfig, frozen=True, kw_only=True):
    server_key: str  # the connection (toolset~server) the tool is called on
    tool_name: str  # as its server names it


@dataclass(frozen=True)
class Resolved:
    """What it takes to run a tool: its public view plus its provider's configuration."""

    tool: Tool
    config: RunConfig  # the subclass for its provider (BuiltinConfig, PythonConfig, HttpConfig, McpConfig)
    toolset_dir: str | None  # where its toolset's files are (Python code, renderer artifacts)
    # The tool's own switch (or its override) is on. ``tool.enabled`` also needs its toolset on;
    # a chat that attached the toolset may run its tools anyway, never one switched off itself.
    switched_on: bool = True
    # A Python or HTTP tool's settings short of the secret values, and the required keys without one.
    settings: Plan | None = None
