"""The tools one chat turn offers a model: every enabled tool, plus the tools of what the branch's
messages attached (seed 003), each under a provider-safe alias with the way back to its id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..api.errors import NotFound
from ..api.toolsets import Tool
from ..store import Database
from ..toolsets import mcp_servers
from . import catalog as registry

if TYPE_CHECKING:
    from ..mcp_host.host import McpHost
    from ..chat.providers.base import ToolSpec

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")
MAX_ALIAS = 64


@dataclass(frozen=True, slots=True)
class ChatTool:
    tool: Tool
    display: str  # what the UI shows: the tool's name, ``<source>.<tool>`` when attached
    alias: str  # what the model sees
    attached: bool  # brought by an attachment: runs even when its toolset is off globally


class ToolBox:
    def __init__(self, tools: list[ChatTool]) -> None:
        self.tools = tools
        self.by_alias = {t.alias: t for t in tools}

    def specs(self) -> list[ToolSpec]:
        from ..chat.providers.base import ToolSpec

        return [ToolSpec(t.alias, t.tool.description or t.display, t.tool.input_schema or {"type": "object"},
                         t.tool.id) for t in self.tools]


def alias_for(tool_id: str) -> str:
    """``mcp:docs~search:query`` -> ``docs_search_query``: readable, ``^[a-zA-Z0-9_-]{1,64}$``."""
    alias = _UNSAFE.sub("_", tool_id.removeprefix("mcp:")).strip("_") or "tool"
    return alias[:MAX_ALIAS]


def _unique(alias: str, taken: set[str]) -> str:
    n = 2
    candidate = alias
    while candidate in taken:
        suffix = f"_{n}"
        candidate = alias[:MAX_ALIAS - len(suffix)] + suffix
        n += 1
    taken.add(candidate)
    return candidate


async def check_attachment(db: Database, kind: str, ref: str) -> str:
    """The canonical id of what an attachment names (NotFound when it names nothing)."""
    if kind == "toolset":
        if await db.fetchone("SELECT 1 FROM toolsets WHERE id = ?", (ref,)) is None:
            raise NotFound("toolset", ref)
        return ref
    return (await mcp_servers.find(db, ref)).key


async def build(db: Database, host: McpHost | None, attachments: list[tuple[str, str]]) -> ToolBox:
    """``attachments``: (kind, canonical id) in the order the branch brought them."""
    chosen: dict[str, ChatTool] = {}
    taken: set[str] = set()
    for kind, ref in attachments:
        for tool in await _attached(db, host, kind, ref):
            if tool.id in chosen:
                continue
            source = ref.partition("~")[2] if kind == "mcpServer" else ref
            display = f"{source}.{tool.id.rpartition(':')[2]}"  # seed 003: <owner>.<handler>
            chosen[tool.id] = ChatTool(tool, display, _unique(alias_for(display), taken), attached=True)
    for tool in await registry.list_tools(db, include_disabled=False, host=host):
        if tool.id not in chosen:
            chosen[tool.id] = ChatTool(tool, tool.name, _unique(alias_for(tool.id), taken), attached=False)
    return ToolBox(list(chosen.values()))


async def _attached(db: Database, host: McpHost | None, kind: str, ref: str) -> list[Tool]:
    if kind == "toolset":
        tools = await registry.toolset_tools(db, ref)
        keys = [row.key for row in await mcp_servers.all_servers(db) if row.toolset_id == ref]
    else:
        tools, keys = [], [ref]
    if host is not None and keys:
        from .providers.mcp import discovered

        prefixes = tuple(f"mcp:{k}:" for k in keys)
        tools += [t for t in await discovered(db, host) if t.id.startswith(prefixes)]
    return tools
