"""Which tool calls may run without asking: allowed for one chat, or always (until the tool's
definition changes: the grant is bound to a digest of what the model and the user were shown)."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from ..api.tools import Tool
from ..store import Database
from ..store.permissions import PermissionRepo


def digest(tool: Tool) -> str:
    shown = {"id": tool.id, "name": tool.name, "description": tool.description, "schema": tool.input_schema,
             "source": tool.toolset_id}
    return hashlib.sha256(json.dumps(shown, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


async def granted(db: Database, chat_id: str, tool: Tool) -> Literal["alwaysGrant", "chatGrant"] | None:
    """Which grant lets the tool run in this chat without asking, if one does."""
    repo = PermissionRepo(db)
    want = digest(tool)
    if await repo.always(tool.id) == want:
        return "alwaysGrant"
    return "chatGrant" if (await repo.chat_grants(chat_id)).get(tool.id) == want else None


async def remember(db: Database, chat_id: str, tool: Tool, decision: str) -> None:
    repo = PermissionRepo(db)
    if decision == "allowAlways":
        await repo.grant_always(tool.id, digest(tool))
    elif decision == "allowChat":
        await repo.grant_chat(chat_id, tool.id, digest(tool))
