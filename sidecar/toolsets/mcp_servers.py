"""The stored side of MCP servers: which servers exist, how to start them, and whether they should
run. The MCP host holds the live connections; this module tells it what they should be."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import Conflict, NotFound
from ..store import CATALOG, Database

_SQL = """
SELECT s.id, s.toolset_id, s.server_type, s.enabled, s.command, s.args, s.cwd, s.url, s.headers, s.env,
       s.requires_confirmation, s.options, ts.enabled, ts.user_mcp
FROM toolset_mcp_servers s JOIN toolsets ts ON ts.id = s.toolset_id
"""


# An MCP tool's override as mcp_tools reads it, in this order.
OVERRIDE_COLUMNS = ("tool_id", "renderer", "renderer_config", "name_override", "description_override",
                    "requires_confirmation", "enabled")


@dataclass(frozen=True)
class ServerRow:
    server_id: str
    toolset_id: str
    type: str
    enabled: bool  # this server's own switch
    toolset_enabled: bool
    user_mcp: bool
    command: str | None
    args: list[str]
    cwd: str | None
    url: str | None
    headers: dict[str, str]
    env: dict[str, str]
    requires_confirmation: bool
    options: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.toolset_id}~{self.server_id}"

    @property
    def should_run(self) -> bool:
        return self.enabled and self.toolset_enabled


def _row(r: Any) -> ServerRow:
    return ServerRow(server_id=r[0], toolset_id=r[1], type=r[2], enabled=bool(r[3]), command=r[4],
                     args=json.loads(r[5]), cwd=r[6], url=r[7], headers=json.loads(r[8]), env=json.loads(r[9]),
                     requires_confirmation=bool(r[10]), options=json.loads(r[11] or "{}"),
                     toolset_enabled=bool(r[12]), user_mcp=bool(r[13]))


async def all_servers(db: Database) -> list[ServerRow]:
    return [_row(r) for r in await db.fetchall(_SQL + " ORDER BY s.toolset_id, s.rowid")]


async def find(db: Database, ref: str) -> ServerRow:
    """A server by key (``toolset~server``) or by bare server id when exactly one has it."""
    return (await _lookup(db, ref, None))[0]


async def find_with_override(db: Database, ref: str, tool: str) -> tuple[ServerRow, Any | None]:
    """The server and its toolset's override of one of its tools (OVERRIDE_COLUMNS), in one query:
    this is on every MCP call's path."""
    return await _lookup(db, ref, tool)


async def _lookup(db: Database, ref: str, tool: str | None) -> tuple[ServerRow, Any | None]:
    sql, args = _SQL, []
    if tool is not None:
        sql = sql.replace("\nFROM", ", " + ", ".join(f"o.{c}" for c in OVERRIDE_COLUMNS) + "\nFROM", 1)
        sql += " LEFT JOIN tool_overrides o ON o.toolset_id = s.toolset_id AND o.tool_id = s.id || ':' || ?"
        args.append(tool)
    toolset_id, sep, server_id = ref.partition("~")
    if sep:
        rows = await db.fetchall(sql + " WHERE s.toolset_id = ? AND s.id = ?", (*args, toolset_id, server_id))
    else:
        rows = await db.fetchall(sql + " WHERE s.id = ?", (*args, ref))
    if not rows:
        raise NotFound("mcpServer", ref)
    if len(rows) > 1:
        keys = ", ".join(f"{r[1]}~{r[0]}" for r in rows)
        raise Conflict("ambiguous server id", f"{len(rows)} toolsets declare a server {ref!r} ({keys}); "
                                              "use the server key")
    found = rows[0]
    override = found[14:] if tool is not None and found[14] is not None else None
    return _row(found), override


async def set_enabled(db: Database, row: ServerRow, enabled: bool) -> ServerRow:
    async with db.write(CATALOG) as w:
        await w.execute("UPDATE toolset_mcp_servers SET enabled = ? WHERE toolset_id = ? AND id = ?",
                        (int(enabled), row.toolset_id, row.server_id))
    return await find(db, row.key)


def config_of(row: ServerRow) -> Any:
    from ..mcp_host.config import ServerConfig

    timeouts = {k: float(v) for k, v in row.options.items() if k in ("connect_timeout", "call_timeout") and v}
    return ServerConfig(key=row.key, server_id=row.server_id, toolset_id=row.toolset_id, type=row.type,  # type: ignore[arg-type]
                        command=row.command, args=tuple(row.args), env=row.env, cwd=row.cwd, url=row.url,
                        headers=row.headers, enabled=row.should_run, **timeouts)
