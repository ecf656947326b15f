"""The tools one chat offers a model: every enabled tool, plus the tools of what the branch's
messages attached (seed 003), each under a provider-safe alias with the way back to its id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from .. import frozen
from ..api.tools import Tool
from ..errors import NotFound
from ..mcp_host.servers import find
from ..store import Database
from ..store.chats import MessageRow
from ..store.mcp_servers import McpServerRepo
from ..store.toolsets import ToolsetRepo
from ..tools.aliases import Aliases
from ..tools.catalog import Catalog
from ..tools.providers import mcp as mcp_tools
from ..tools.settings import status_of
from . import context
from .providers.base import ToolSpec

if TYPE_CHECKING:
    from .chats import ChatService


# Names of a turn's own tools (chat/offer.py's find_tools): no catalog tool gets them as its alias.
RESERVED_ALIASES = ("find_tools",)


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
        return [ToolSpec(t.alias, t.tool.description or t.display, t.tool.input_schema or {"type": "object"},
                         t.tool.id) for t in self.tools]

    def mcp_servers(self) -> list[str]:
        """The keys of the MCP servers whose tools are in the box, in the order of their first tool."""
        keys = (mcp_tools.parse_id(t.tool.id)[0] for t in self.tools if t.tool.provider == "mcp")
        return list(dict.fromkeys(keys))

    def shown(self) -> list[Tool]:
        """The tools as the chat shows them: under their display names, and enabled (here they run)."""
        return [msgspec.structs.replace(t.tool, name=t.display, enabled=True,
                                        status=status_of(t.tool.provider, True, t.tool.missing_config))
                for t in self.tools]


async def check_attachment(db: Database, kind: str, ref: str) -> str:
    """The canonical id of what an attachment names (NotFound when it names nothing)."""
    if kind == "toolset":
        toolset = await ToolsetRepo(db).get(ref)
        if toolset is None:
            raise NotFound("toolset", ref)
        frozen.refuse_if_deleted(ref, toolset.soft_deleted_at, "attach it to a chat")
        return ref
    server = await find(McpServerRepo(db), ref)
    frozen.refuse_if_deleted(server.toolset_id, server.toolset_deleted_at, "attach its servers to a chat")
    return server.key


async def build(catalog: Catalog, attachments: list[tuple[str, str]]) -> ToolBox:
    """``attachments``: (kind, canonical id) in the order the branch brought them."""
    chosen: dict[str, ChatTool] = {}
    aliases = Aliases()
    for name in RESERVED_ALIASES:
        aliases.unique(name)
    live = await catalog.mcp_tools()
    for kind, ref in attachments:
        for tool in await _attached(catalog, kind, ref, live):
            if tool.id in chosen or tool.current is False:
                continue
            source = ref.partition("~")[2] if kind == "mcpServer" else ref
            display = f"{source}.{tool.id.rpartition(':')[2]}"  # seed 003: <owner>.<handler>
            chosen[tool.id] = ChatTool(tool, display, aliases.unique(display), attached=True)
    for tool in await catalog.list_tools(include_disabled=False, live=live):
        # One version of a slug per toolset: the current one (seed 002); others run from the palette.
        if tool.id not in chosen and tool.current is not False:
            chosen[tool.id] = ChatTool(tool, tool.name, aliases.unique(tool.id), attached=False)
    return ToolBox(list(chosen.values()))


async def for_chat(chats: ChatService, catalog: Catalog, chat_id: str) -> ToolBox:
    """What a turn on the chat's active branch would offer (tools/list with chatId)."""
    chat, messages = await chats.get(chat_id)
    return await build(catalog, branch_attachments(context.branch(messages, chat.active_leaf_message_id)))


def branch_attachments(path: list[MessageRow]) -> list[tuple[str, str]]:
    """(kind, canonical id) of what the branch's user messages attached, first seen first."""
    found: list[tuple[str, str]] = []
    for msg in path:
        if msg.role == "user" and msg.parts:
            for a in context.parts_of(msg).get("attachments") or []:
                if (a["kind"], a["id"]) not in found:
                    found.append((a["kind"], a["id"]))
    return found


async def _attached(catalog: Catalog, kind: str, ref: str, live: list[Tool]) -> list[Tool]:
    # A tool switched off by the user stays off in a chat that attached its toolset; only the
    # toolset's own switch is overruled by attaching it (seed 003).
    if kind == "toolset":
        return await catalog.attachable(ref, live)
    prefix = f"mcp:{ref}:"
    return [t for t in live if t.id.startswith(prefix) and t.enabled]
