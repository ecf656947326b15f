"""Tools that ship with the sidecar (seed 002: read-only except ``enabled``).

They run inside the sidecar on the chat's workspace folder, through the same call path as toolset
tools (arguments checked against the schema, workspace materialised before and snapshotted after).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....sandbox.policy import DEFAULT, Confinement
from ....sandbox.runner import Sandbox


@dataclass(frozen=True)
class BuiltinCall:
    workspace: Path
    args: dict[str, Any]
    timeout: float  # seconds the call may take at most
    confinement: Confinement = DEFAULT  # what a process the tool starts may do (run_command)
    sandbox: Sandbox = field(default_factory=Sandbox)  # the sidecar's, which enforces it


class BuiltinError(Exception):
    """The tool ran and failed; ``result`` keeps what it produced before failing (output so far)."""

    def __init__(self, message: str, result: Any = None, kind: str = "raised") -> None:
        super().__init__(message)
        self.message = message
        self.result = result
        self.kind = kind  # "raised" or "timeout", as in the tool call's errorKind


@dataclass(frozen=True)
class Builtin:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[BuiltinCall], Awaitable[Any]]
    renderer: str
    renderer_config: dict[str, Any]
    requires_confirmation: bool = False


def _all() -> dict[str, Builtin]:
    from . import files, shell

    return {b.name: b for b in (*files.TOOLS, *shell.TOOLS)}


BUILTINS: dict[str, Builtin] = _all()
