"""The override layer (seed 001) applied on read, the same way for every provider's tools."""

from __future__ import annotations

import msgspec

from ..api.toolsets import Tool
from ..store.toolsets import OverrideRow


def switched_on(o: OverrideRow | None) -> bool:
    """Whether the user's override leaves the tool on (no override, or one that does not say off)."""
    return o is None or o.enabled is None or o.enabled


def apply(tool: Tool, o: OverrideRow | None) -> Tool:
    """The tool with its override applied field by field: each field the override sets wins,
    every other keeps the tool's own value; a tool switched off by it is not enabled."""
    if o is None:
        return tool
    return msgspec.structs.replace(
        tool,
        name=o.name_override or tool.name,
        description=o.description_override or tool.description,
        requires_confirmation=(o.requires_confirmation if o.requires_confirmation is not None
                               else tool.requires_confirmation),
        enabled=tool.enabled and switched_on(o),
        renderer=o.renderer or tool.renderer,
        renderer_config=o.renderer_config if o.renderer_config is not None else tool.renderer_config,
    )
