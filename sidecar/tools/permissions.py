"""Which tool calls may run without asking: allowed for one chat, or always (until the tool's
definition changes: the grant is bound to a digest of what the model and the user were shown)."""

from __future__ import annotations

import hashlib
import json

from ..api.toolsets import Tool
from ..store import Database
from ..store.rows import now


def digest(tool: Tool) -> str:
    shown = {"id": tool.id, "name": tool.name, "description": tool.description, "schema": tool.input_schema,
             "source": tool.toolset_id}
    return hashlib.sha256(json.dumps(shown, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


async def allowed(db: Database, chat_id: str, tool: Tool) -> bool:
    want = digest(tool)
    row = await db.fetchone("SELECT digest FROM tool_permissions WHERE tool_id = ?", (tool.id,))
    if row is not None and row[0] == want:
        return True
    return (await _chat_grants(db, chat_id)).get(tool.id) == want


async def remember(db: Database, chat_id: str, tool: Tool, decision: str) -> None:
    if decision == "allowAlways":
        async with db.write() as w:
            await w.execute(
                "INSERT INTO tool_permissions (tool_id, digest, granted_at) VALUES (?, ?, ?) "
                "ON CONFLICT (tool_id) DO UPDATE SET digest = excluded.digest, granted_at = excluded.granted_at",
                (tool.id, digest(tool), now()))
    elif decision == "allowChat":
        async with db.write() as w:
            cursor = await w.execute("SELECT settings FROM chats WHERE id = ?", (chat_id,))
            row = await cursor.fetchone()
            settings = json.loads(row[0] or "{}") if row else {}
            settings.setdefault("allowedTools", {})[tool.id] = digest(tool)
            await w.execute("UPDATE chats SET settings = ? WHERE id = ?", (json.dumps(settings), chat_id))


async def _chat_grants(db: Database, chat_id: str) -> dict[str, str]:
    row = await db.fetchone("SELECT settings FROM chats WHERE id = ?", (chat_id,))
    if row is None:
        return {}
    grants = json.loads(row[0] or "{}").get("allowedTools")
    return grants if isinstance(grants, dict) else {}
