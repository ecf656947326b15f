"""Tool permissions: grants that let a call run without asking, each bound to the digest of the
tool definition the user saw. "Always" grants have their table; a chat's grants live in its
settings (``allowedTools``), so deleting the chat drops them."""

from __future__ import annotations

from typing import Any, cast

import msgspec

from .db import Database
from .rows import now


def _settings(raw: str | None) -> dict[str, Any]:
    try:
        return msgspec.json.decode(raw or "{}", type=dict[str, Any])
    except msgspec.ValidationError:  # JSON, but not an object: no settings (bad JSON still raises)
        return {}


class PermissionRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def always(self, tool_id: str) -> str | None:
        """The digest an "always" grant of the tool was given for, if there is one."""
        row = await self.db.fetchone("SELECT digest FROM tool_permissions WHERE tool_id = ?", (tool_id,))
        return row["digest"] if row is not None else None

    async def grant_always(self, tool_id: str, digest: str) -> None:
        async with self.db.write() as w:
            await w.execute(
                "INSERT INTO tool_permissions (tool_id, digest, granted_at) VALUES (?, ?, ?) "
                "ON CONFLICT (tool_id) DO UPDATE SET digest = excluded.digest, granted_at = excluded.granted_at",
                (tool_id, digest, now()))

    async def chat_grants(self, chat_id: str) -> dict[str, str]:
        """tool id -> digest of the tools allowed for this chat."""
        row = await self.db.fetchone("SELECT settings FROM chats WHERE id = ?", (chat_id,))
        grants = _settings(row["settings"]).get("allowedTools") if row is not None else None
        # grant_chat writes them: tool id -> digest, both strings.
        return cast(dict[str, str], grants) if isinstance(grants, dict) else {}

    async def grant_chat(self, chat_id: str, tool_id: str, digest: str) -> None:
        async with self.db.write() as w:
            cursor = await w.execute("SELECT settings FROM chats WHERE id = ?", (chat_id,))
            row = await cursor.fetchone()
            if row is None:
                return  # the chat went away meanwhile: nothing to remember it in
            settings = _settings(row["settings"])
            settings.setdefault("allowedTools", {})[tool_id] = digest
            await w.execute("UPDATE chats SET settings = ? WHERE id = ?",
                            (msgspec.json.encode(settings).decode(), chat_id))
