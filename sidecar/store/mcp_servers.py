"""MCP servers as stored: every statement on `toolset_mcp_servers`, returning `McpServerRow`s.

A server belongs to a toolset (its key is ``toolset~server``); whether it should run is its own
switch and its toolset's. What the host does with a row is `mcp_host/servers.py`'s business.

A row is the server's declaration (`api.mcp.ServerDecl`, the one mcpServers/add and toolset.yaml
take) plus where it lives and its switches. The declaration's columns hold what they are named for;
``options`` (JSON) holds the rest of it: ``connect_timeout``, ``call_timeout``, ``install_timeout``, ``log_level``,
``env_passthrough``, ``sandbox`` (the block, sizes in bytes; ``{}``: seed 004's defaults) and the manifest's
``tool_output``, each only when set. Rows written before the block existed say ``sandboxed: true``,
read as the block it meant (``{network: full}``). A row was checked against the declaration's bounds
when it was written, so reading one builds it without checking it again: a bound made stricter later
never makes a stored server unreadable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite
import msgspec

from ..api.mcp import ServerDecl, ServerSandbox
from .db import CATALOG, Database

log = logging.getLogger(__name__)

_encode = msgspec.json.encode
_decode = msgspec.json.decode
_DECLARED = ServerDecl.__struct_fields__


class McpServerRow(ServerDecl, kw_only=True):
    """A stored server: its declaration (``id`` is the server id) and where it lives."""

    toolset_id: str
    enabled: bool = True
    """This server's own switch."""
    toolset_enabled: bool = True
    user_mcp: bool = False
    """Added with mcpServers/add: its toolset holds only this server."""
    tool_output: dict[str, Any] = {}
    """The manifest's ``tool_output`` (an output declaration by MCP tool name), as checked data."""
    toolset_deleted_at: str | None = None
    """Its toolset is soft-deleted (toolsets/delete): the server does not run until it is restored."""

    @classmethod
    def of(cls, decl: ServerDecl, **where: Any) -> McpServerRow:
        """``decl`` stored in a toolset: ``where`` gives ``toolset_id`` and any other field of a row."""
        return cls(**{f: getattr(decl, f) for f in _DECLARED}, **where)

    def as_declaration(self) -> ServerDecl:
        """The declaration alone (what mcpServers/update edits)."""
        return ServerDecl(**{f: getattr(self, f) for f in _DECLARED})

    def with_declaration(self, decl: ServerDecl) -> McpServerRow:
        """This row with ``decl`` as its declaration; the server id, toolset and switches stay."""
        return msgspec.structs.replace(self, **{f: getattr(decl, f) for f in _DECLARED if f != "id"})

    @property
    def server_id(self) -> str:
        return self.id

    @property
    def key(self) -> str:
        return f"{self.toolset_id}~{self.id}"

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
    options = _decode(r[11] or "{}")
    return McpServerRow(id=r[0], toolset_id=r[1], type=r[2], enabled=bool(r[3]), command=r[4], args=_decode(r[5]),
                        cwd=r[6], url=r[7], headers=_decode(r[8]), env=_decode(r[9]),
                        requires_confirmation=bool(r[10]), connect_timeout=options.get("connect_timeout"),
                        call_timeout=options.get("call_timeout"), log_level=options.get("log_level"),
                        install_timeout=options.get("install_timeout"),
                        env_passthrough=options.get("env_passthrough") or [], sandbox=sandbox_option(options),
                        tool_output=options.get("tool_output") or {},
                        toolset_enabled=bool(r[12]), user_mcp=bool(r[13]), toolset_deleted_at=r[14])


def sandbox_option(options: dict[str, Any]) -> ServerSandbox | None:
    """The stored block, or the older ``sandboxed: true`` as the block it meant (it kept the
    network); None: unconfined. A block that no longer reads (written by an older version) is seed
    004's defaults, said in the log: it never widens anything."""
    given = options.get("sandbox")
    if isinstance(given, dict):
        try:
            return msgspec.convert(given, ServerSandbox)
        except msgspec.ValidationError as exc:
            log.warning("the stored sandbox of an MCP server was refused (%s): it runs with seed 004's "
                        "defaults, no network", exc)
            return ServerSandbox()
    return ServerSandbox(network="full") if options.get("sandboxed") else None


def _options(s: McpServerRow) -> str:
    """The declaration's fields without a column of their own, each only when set."""
    options: dict[str, Any] = {k: v for k, v in (("connect_timeout", s.connect_timeout),
                                                 ("call_timeout", s.call_timeout), ("log_level", s.log_level),
                                                 ("install_timeout", s.install_timeout),
                                                 ("env_passthrough", s.env_passthrough),
                                                 ("tool_output", s.tool_output)) if v}
    if s.sandbox is not None:  # {} too: the defaults, which are not "unconfined"
        options["sandbox"] = msgspec.to_builtins(s.sandbox)
    return _encode(options).decode()


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
                 _options(row), row.toolset_id, row.id))


async def insert(w: aiosqlite.Connection, rows: Iterable[McpServerRow], created_at: str) -> None:
    """Store a toolset's declared servers, inside the caller's write (installing the toolset)."""
    await w.executemany(
        "INSERT INTO toolset_mcp_servers (id, toolset_id, server_type, enabled, command, args, cwd, url, "
        "headers, env, requires_confirmation, options, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(s.id, s.toolset_id, s.type, int(s.enabled), s.command, _encode(s.args).decode(), s.cwd, s.url,
          _encode(s.headers).decode(), _encode(s.env).decode(), int(s.requires_confirmation), _options(s),
          created_at) for s in rows])


async def delete_of_toolset(w: aiosqlite.Connection, toolset_id: str) -> None:
    """Drop a toolset's servers inside the caller's write (replacing the toolset on an upgrade)."""
    await w.execute("DELETE FROM toolset_mcp_servers WHERE toolset_id = ?", (toolset_id,))
