"""What each MCP server last listed, per tool: MCP tools are discovered live and never stored as
tools (seed 001), so this is what is left to show of one its server stops listing (seed 002: a
tool whose provider disappears is kept, marked unavailable, never deleted automatically)."""

from __future__ import annotations

from typing import Any

import msgspec

from .db import CATALOG, Database
from .rows import now

_encode = msgspec.json.encode
_decode = msgspec.json.decode


class SeenTool(msgspec.Struct, kw_only=True, frozen=True):
    toolset_id: str
    server_id: str
    name: str
    definition: dict[str, Any]  # title, description, inputSchema, outputSchema, annotations
    seen_at: str  # when its server last listed it (UTC)
    vanished_at: str | None = None  # when its server was first seen without it

    @property
    def key(self) -> str:
        return f"{self.toolset_id}~{self.server_id}"


def _row(r: Any) -> SeenTool:
    return SeenTool(toolset_id=r["toolset_id"], server_id=r["server_id"], name=r["name"],
                    definition=_decode(r["definition"]), seen_at=r["seen_at"], vanished_at=r["vanished_at"])


class McpToolsSeenRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def vanished(self) -> list[SeenTool]:
        """The tools kept after their server stopped listing them."""
        rows = await self.db.fetchall(
            "SELECT toolset_id, server_id, name, definition, seen_at, vanished_at FROM mcp_tools_seen "
            "WHERE vanished_at IS NOT NULL ORDER BY toolset_id, server_id, name")
        return [_row(r) for r in rows]

    async def remember(self, toolset_id: str, server_id: str, listed: dict[str, dict[str, Any]]) -> list[str]:
        """Record what a connected server lists now (tool name -> definition). A tool it listed
        before and no longer does is kept as vanished when the user has something of it (an
        override, past calls), else forgotten. Writes (and so changes the catalog) only when
        something changed; returns the names that vanished just now."""
        rows = await self.db.fetchall(
            "SELECT name, definition, vanished_at FROM mcp_tools_seen WHERE toolset_id = ? AND server_id = ?",
            (toolset_id, server_id))
        stored = {r["name"]: (r["definition"], r["vanished_at"]) for r in rows}
        texts = {name: _encode(d).decode() for name, d in listed.items()}
        put = [n for n, text in texts.items() if stored.get(n) != (text, None)]
        gone = [n for n, (_, vanished_at) in stored.items() if n not in listed and vanished_at is None]
        if not put and not gone:
            return []
        keep: set[str] = set()
        for name in gone:
            if await self._worth_keeping(toolset_id, server_id, name):
                keep.add(name)
        stamp = now()
        async with self.db.write(CATALOG) as w:
            await w.executemany(
                "INSERT INTO mcp_tools_seen (toolset_id, server_id, name, definition, seen_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (toolset_id, server_id, name) DO UPDATE SET definition = excluded.definition, "
                "seen_at = excluded.seen_at, vanished_at = NULL",
                [(toolset_id, server_id, n, texts[n], stamp) for n in put])
            await w.executemany(
                "UPDATE mcp_tools_seen SET vanished_at = ? WHERE toolset_id = ? AND server_id = ? AND name = ?",
                [(stamp, toolset_id, server_id, n) for n in gone if n in keep])
            await w.executemany(
                "DELETE FROM mcp_tools_seen WHERE toolset_id = ? AND server_id = ? AND name = ?",
                [(toolset_id, server_id, n) for n in gone if n not in keep])
        return sorted(keep)

    async def _worth_keeping(self, toolset_id: str, server_id: str, name: str) -> bool:
        found = await self.db.fetchone(
            "SELECT EXISTS (SELECT 1 FROM tool_overrides WHERE toolset_id = ? AND tool_id = ?) "
            "OR EXISTS (SELECT 1 FROM tool_calls WHERE tool_id = ?)",
            (toolset_id, f"{server_id}:{name}", f"mcp:{toolset_id}~{server_id}:{name}"))
        return bool(found is not None and found[0])
