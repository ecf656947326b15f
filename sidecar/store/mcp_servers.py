"""MCP servers as stored: every statement on `toolset_mcp_servers`, returning `McpServerRow`s.

A server belongs to a toolset (its key is ``toolset~server``); whether it should run is its own
switch and its toolset's. What the host does with a row is `mcp_host/servers.py`'s business.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite
import msgspec

from ..api.mcp import ServerType
from .db import CATALOG, Database

_encode = msgspec.json.encode
_decode = msgspec.json.decode


class McpServerRow(msgspec.Struct, kw_only=True, frozen=True):
    server_id: str
    toolset_id: str
    type: ServerType
    enabled: bool = True
    """This server's own switch."""
    toolset_enabled: bool = True
    user_mcp: bool = False
    """Added with mcpServers/add: its toolset holds only this server."""
    command: str | None = None
    args: list[str] = []
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    env: dict[str, str] = {}
    requires_confirmation: bool = False
    options: dict[str, Any] = {}
    """``connect_timeout`` and ``call_timeout`` in seconds, when set."""
    toolset_deleted_at: str | None = None
    """Its toolset is soft-deleted (toolsets/delete): the server does not run until it is restored."""

    @property
    def key(self) -> str:
        return f"{self.toolset_id}~{self.server_id}"

    @property
    def should_run(self) -> bool:
        return self.enabled and self.toolset_enabled and self.toolset_deleted_at is None


class AmbiguousServer(Exception):
    """A bare server id names servers of several toolsets."""

    def __init__(self, ref: str, keys: list[str]) -> None:
        super().__init__(f"{len(keys)} toolsets declare a server {ref!r} ({', '.join(keys)}); use the server key")
        self.ref = ref
        self.keys = keys


_COLS = ("s.id, s.toolset_id, s.server_type, s.enabled, s.command, s.args, s.cwd, s.url, s.headers, s.env, "
         "s.requires_confirmation, s.options, ts.enabled, ts.user_mcp, ts.soft_deleted_at")
_SQL = f"SELECT {_COLS} FROM toolset_mcp_servers s JOIN toolsets ts ON ts.id = s.toolset_id"
_ROWID = _COLS.count(",") + 1  # where a query adds s.rowid after _COLS
def _row(r: Sequence[Any]) -> McpServerRow:
    return McpServerRow(server_id=r[0], toolset_id=r[1], type=r[2], enabled=bool(r[3]), command=r[4],
                        args=_decode(r[5]), cwd=r[6], url=r[7], headers=_decode(r[8]), env=_decode(r[9]),
                        requires_confirmation=bool(r[10]), options=_decode(r[11] or "{}"),
                        toolset_enabled=bool(r[12]), user_mcp=bool(r[13]), toolset_deleted_at=r[14])


class McpServerRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def all(self, *, include_deleted: bool = False) -> list[McpServerRow]:
        """Every server but those of soft-deleted toolsets (the host stops those: they are not
        here), unless ``include_deleted``."""
        where = "" if include_deleted else " WHERE ts.soft_deleted_at IS NULL"
        return [_row(r) for r in await self.db.fetchall(_SQL + where + " ORDER BY s.toolset_id, s.rowid")]

    async def page(self, limit: int, after: tuple[str, int] | None) -> list[tuple[int, McpServerRow]]:
        """Up to ``limit`` servers past ``after``, with their rowid: a keyset page on
        (toolset_id, rowid), the order ``all`` lists them in."""
        where, params = (" AND (s.toolset_id, s.rowid) > (?, ?)", after) if after is not None else ("", ())
        rows = await self.db.fetchall(
            f"SELECT {_COLS}, s.rowid FROM toolset_mcp_servers s JOIN toolsets ts ON ts.id = s.toolset_id "
            f"WHERE ts.soft_deleted_at IS NULL{where} ORDER BY s.toolset_id, s.rowid LIMIT ?", (*params, limit))
        return [(r[_ROWID], _row(r)) for r in rows]

    async def of_toolset(self, toolset_id: str) -> list[McpServerRow]:
        """A toolset's servers in manifest order."""
        rows = await self.db.fetchall(_SQL + " WHERE s.toolset_id = ? ORDER BY s.rowid", (toolset_id,))
        return [_row(r) for r in rows]

    async def find(self, ref: str) -> McpServerRow | None:
        """A server by key (``toolset~server``) or by bare server id when exactly one has it.

        Raises:
            AmbiguousServer: a bare id that several toolsets use.
        """
        if "~" in ref:
            return await self.by_key(ref)
        rows = await self.db.fetchall(_SQL + " WHERE s.id = ?", (ref,))
        if not rows:
            return None
        if len(rows) > 1:
            raise AmbiguousServer(ref, [f"{r[1]}~{r[0]}" for r in rows])
        return _row(rows[0])

    async def by_key(self, key: str) -> McpServerRow | None:
        """A server by its key (``toolset~server``)."""
        toolset_id, _, server_id = key.partition("~")
        rows = await self.db.fetchall(_SQL + " WHERE s.toolset_id = ? AND s.id = ?", (toolset_id, server_id))
        return _row(rows[0]) if rows else None

    async def set_enabled(self, toolset_id: str, server_id: str, enabled: bool) -> None:
        async with self.db.write(CATALOG) as w:
            await w.execute("UPDATE toolset_mcp_servers SET enabled = ? WHERE toolset_id = ? AND id = ?",
                            (int(enabled), toolset_id, server_id))

    async def update(self, row: McpServerRow) -> None:
        """Store a changed server in place (its toolset, overrides and created_at stay)."""
        async with self.db.write(CATALOG) as w:
            await w.execute(
                "UPDATE toolset_mcp_servers SET server_type = ?, enabled = ?, command = ?, args = ?, cwd = ?, url = ?, "
                "headers = ?, env = ?, requires_confirmation = ?, options = ? WHERE toolset_id = ? AND id = ?",
                (row.type, int(row.enabled), row.command, _encode(row.args).decode(), row.cwd, row.url,
                 _encode(row.headers).decode(), _encode(row.env).decode(), int(row.requires_confirmation),
                 _encode(row.options).decode(), row.toolset_id, row.server_id))


async def insert(w: aiosqlite.Connection, rows: Iterable[McpServerRow], created_at: str) -> None:
    """Store a toolset's declared servers, inside the caller's write (installing the toolset)."""
    await w.executemany(
        "INSERT INTO toolset_mcp_servers (id, toolset_id, server_type, enabled, command, args, cwd, url, "
        "headers, env, requires_confirmation, options, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(s.server_id, s.toolset_id, s.type, int(s.enabled), s.command, _encode(s.args).decode(), s.cwd, s.url,
          _encode(s.headers).decode(), _encode(s.env).decode(), int(s.requires_confirmation),
          _encode(s.options).decode(), created_at) for s in rows])


async def delete_of_toolset(w: aiosqlite.Connection, toolset_id: str) -> None:
    """Drop a toolset's servers inside the caller's write (replacing the toolset on an upgrade)."""
    await w.execute("DELETE FROM toolset_mcp_servers WHERE toolset_id = ?", (toolset_id,))
