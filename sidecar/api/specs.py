"""Every method of the contract, in one tuple: what ``scripts/gen_protocol.py`` and the method
table read. Importing it builds every API model (about 13 ms), so nothing before the ``initialize``
answer does: the package's ``__init__`` stays empty and the start-up path imports only
``api.lifecycle``.
"""

from __future__ import annotations

from . import (
    authoring,
    bundles,
    chats,
    config,
    debug,
    lifecycle,
    limits,
    mcp,
    providers,
    relevance,
    schedules,
    search,
    secrets,
    settings,
    tool_calls,
    toolsets,
    workspace,
)
from .base import MethodSpec

SPECS: tuple[MethodSpec, ...] = (*lifecycle.SPECS, *chats.SPECS, *workspace.SPECS, *toolsets.SPECS, *limits.SPECS,
                                   *authoring.SPECS,
                                   *tool_calls.SPECS, *config.SPECS, *mcp.SPECS, *providers.SPECS, *secrets.SPECS,
                                   *settings.SPECS, *debug.SPECS, *schedules.SPECS, *bundles.SPECS, *search.SPECS,
                                   *relevance.SPECS)

# The endpoints of seed 000 §7, in its order; protocol/README.md maps each to the method serving it.
SEED_ENDPOINTS: tuple[str, ...] = (
    "list_toolsets", "get_toolset", "import_toolset", "export_toolset", "enable_toolset",
    "uninstall_toolset", "list_tools", "get_tool", "get_workspace_files", "get_workspace_file",
    "get_workspace_manifest", "stream", "get_available_tools",
)


def spec(name: str) -> MethodSpec:
    for s in SPECS:
        if s.name == name:
            return s
    raise KeyError(name)
