"""Thin adapters from wire params to services, one module per api module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..api import SPECS
from ..rpc import MethodTable
from ..rpc.methods import Handler
from . import chats, debug, lifecycle, mcp, providers, toolsets, workspace

if TYPE_CHECKING:
    from ..app import Sidecar

ENGINE_METHODS = {"$/cancelRequest"}  # answered by the engine itself


def build_method_table(app: Sidecar) -> MethodTable:
    """Bind every client-to-server spec to its handler; refuse to start if one is missing."""
    handlers: dict[str, Handler] = {}
    for module in (lifecycle, chats, workspace, toolsets, mcp, providers, debug):
        handlers.update(module.handlers(app))
    table = MethodTable()
    for spec in SPECS:
        if spec.direction == "serverToClient" or spec.name in ENGINE_METHODS:
            continue
        handler = handlers.pop(spec.name, None)
        if handler is None:
            raise RuntimeError(f"the contract names {spec.name!r} but no handler serves it")
        table.add(spec.name, handler, params_type=spec.params,
                  notification=spec.kind == "notification", inline=spec.inline, cancel=spec.cancel)
    if handlers:
        raise RuntimeError(f"handlers without a spec in sidecar/api: {sorted(handlers)}")
    return table
