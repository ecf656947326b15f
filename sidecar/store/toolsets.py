"""Installed toolsets and their files: what one install writes in one transaction, and what an
export reads back. Every write here changes the tool catalog (``write(changes=CATALOG)``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import aiosqlite
import msgspec

from . import mcp_servers, toolset_sources
from .db import CATALOG, Database
from .mcp_servers import McpServerRow
from .rows import json_text as _json
from .toolset_sources import SourceRow

SourceType = Literal["zip", "local", "url", "user"]
FileKind = Literal["python", "artifact", "asset", "config"]
Origin = Literal["user", "manifest"]

class ToolsetRow(msgspec.Struct, kw_only=True):
    id: str
    name: str
    version: str
    description: str
    enabled: bool
    user_mcp: bool  # made by mcpServers/add, not imported
    source_type: SourceType
    source_ref: str | None
    installed_at: str
    files_dir: str | None  # the current revision's folder; None for userMcp toolsets
    soft_deleted_at: str | None = None  # toolsets/delete hid it then; the reaper removes it later
    modified_at: str = ""  # the last structural change (tools, name, description); not a switch


class ToolsetFile(msgspec.Struct, kw_only=True):
    path: str  # inside the bundle, '/'-separated
    kind: FileKind
    sha256: str
    size: int
    stored_path: str


class StoredTool(msgspec.Struct, kw_only=True):
    """A Python or HTTP tool as its toolset declared it (no override applied)."""

    tool_id: str  # toolset:tool
    provider: Literal["python", "http"] = "python"
    name: str
    description: str
    entrypoint: str | None
    input_schema: dict[str, Any] | None
    requires_confirmation: bool
    config: dict[str, Any]  # timeout, needs_workspace
    # Why it cannot run (its module vanished on a reload): stored anyway, with its override kept (seed 002).
    unavailable_reason: str | None = None
    slug: str = ""  # seed 002 (sidecar/tools/slugs.py)
    version: str = "1"
    current: bool = True  # the version `+slug` means
    tags: list[str] = []
    created_at: str = ""  # as stored; on an install, the stamp comes from the write
    modified_at: str = ""


class OverrideRow(msgspec.Struct, kw_only=True):
    """One tool's override (seed 001); a None field leaves the tool's own value."""

    tool_id: str  # toolset:tool for Python tools, server:tool for MCP tools
    renderer: str | None = None
    renderer_config: dict[str, Any] | None = None
    name_override: str | None = None
    description_override: str | None = None
    requires_confirmation: bool | None = None
    enabled: bool | None = None
    origin: Origin = "user"


class Install(msgspec.Struct, kw_only=True):
    toolset: ToolsetRow
    manifest_version: str
    updated_at: str
    files: list[ToolsetFile]
    tools: list[StoredTool]
    overrides: list[OverrideRow]  # from the manifest: a user's override of the same tool wins
    servers: list[McpServerRow]  # McpServerDecl.row()
    config_schema: dict[str, Any] = {}  # the toolset-level fields (seed 004), as plain data
    limits: dict[str, Any] | None = None  # the toolset's constraints and sandbox (a sandbox.policy.Patch)
    source: SourceRow | None = None  # a URL import's bundle digest and validators; None drops the old one


_COLS = ("id, name, version, description, enabled, user_mcp, source_type, source_ref, installed_at, files_dir, "
         "soft_deleted_at, modified_at")
# What an override sets (each None: the tool's own value), and its columns.
OVERRIDE_FIELDS = ("renderer", "renderer_config", "name_override", "description_override",
                   "requires_confirmation", "enabled")
OVERRIDE_COLS = ("tool_id", *OVERRIDE_FIELDS, "origin")


def _toolset(r: Any) -> ToolsetRow:
    return ToolsetRow(id=r["id"], name=r["name"], version=r["version"], description=r["description"],
                      enabled=bool(r["enabled"]), user_mcp=bool(r["user_mcp"]), source_type=r["source_type"],
                      source_ref=r["source_ref"], installed_at=r["installed_at"], files_dir=r["files_dir"],
                      soft_deleted_at=r["soft_deleted_at"],
                      modified_at=r["modified_at"] or r["installed_at"])


_STORED_COLS = ("tool_id, provider, name, description, entrypoint, input_schema, requires_confirmation, config, "
              "slug, version, current, tags, created_at, modified_at, unavailable_reason")


def _stored(r: Any) -> StoredTool:
    return StoredTool(tool_id=r["tool_id"], provider=r["provider"], name=r["name"], description=r["description"],
                      entrypoint=r["entrypoint"],
                      input_schema=msgspec.json.decode(r["input_schema"]) if r["input_schema"] else None,
                      requires_confirmation=bool(r["requires_confirmation"]),
                      config=msgspec.json.decode(r["config"] or "{}"), slug=r["slug"], version=r["version"],
                      current=bool(r["current"]), tags=msgspec.json.decode(r["tags"] or "[]"),
                      created_at=r["created_at"], modified_at=r["modified_at"],
                      unavailable_reason=r["unavailable_reason"])


def _shape(t: StoredTool) -> tuple[Any, ...]:
    """What a structural change changes (seed 002: body, tags), as stored."""
    return (t.provider, t.name, t.description, t.entrypoint, t.input_schema, t.requires_confirmation, t.config,
            t.slug, t.version, t.tags)


async def insert_tools(w: aiosqlite.Connection, toolset_id: str, tools: list[StoredTool]) -> None:
    """Insert ``tools`` with their own stamps (``created_at``/``modified_at`` set by the caller)."""
    await w.executemany(
        "INSERT INTO tools (tool_id, toolset_id, provider, name, description, input_schema, requires_confirmation, "
        "enabled, entrypoint, config, slug, version, current, tags, created_at, modified_at, unavailable_reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(s.tool_id, toolset_id, s.provider, s.name, s.description,
          _json(s.input_schema) if s.input_schema is not None else None, int(s.requires_confirmation),
          s.entrypoint, _json(s.config), s.slug, s.version, int(s.current), _json(s.tags), s.created_at,
          s.modified_at, s.unavailable_reason) for s in tools])


def _opt_json(value: Any) -> str | None:
    return _json(value) if value is not None else None


def _opt_bool(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def override_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The override fields of ``fields`` present there, as stored: JSON for the config, 0/1 for the flags."""
    values: dict[str, Any] = {}
    for field in OVERRIDE_FIELDS:
        if field not in fields:
            continue
        value = fields[field]
        if value is not None and field == "renderer_config":
            value = _json(value)
        elif value is not None and field in ("requires_confirmation", "enabled"):
            value = int(value)
        values[field] = value
    return values


async def read_overrides(db: Database, toolset_id: str, tool_id: str | None = None) -> list[OverrideRow]:
    """The toolset's overrides (of ``tool_id`` only, when given), by tool id."""
    where = "toolset_id = ?" + (" AND tool_id = ?" if tool_id is not None else "")
    rows = await db.fetchall(f"SELECT {', '.join(OVERRIDE_COLS)} FROM tool_overrides WHERE {where} ORDER BY tool_id",
                             (toolset_id,) if tool_id is None else (toolset_id, tool_id))
    return [override_of(r) for r in rows]


def override_of(r: Any) -> OverrideRow:
    """An OverrideRow from a row holding ``OVERRIDE_COLS`` by name."""
    config = r["renderer_config"]
    return OverrideRow(tool_id=r["tool_id"], renderer=r["renderer"],
                       renderer_config=msgspec.json.decode(config) if config else None,
                       name_override=r["name_override"], description_override=r["description_override"],
                       requires_confirmation=_opt_bool(r["requires_confirmation"]),
                       enabled=_opt_bool(r["enabled"]), origin=r["origin"])


def _stamped(new: StoredTool, old: StoredTool | None, code_changed: bool, stamp: str) -> StoredTool:
    """``new`` with its timestamps: a tool the toolset had keeps its created_at, and its
    modified_at unless its declaration (or, for a Python tool, the toolset's code) changed."""
    if old is None:
        return msgspec.structs.replace(new, created_at=stamp, modified_at=stamp)
    same = _shape(new) == _shape(old) and not (code_changed and new.provider == "python")
    return msgspec.structs.replace(new, created_at=old.created_at or stamp,
                                   modified_at=old.modified_at if same and old.modified_at else stamp)


class ToolsetRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, toolset_id: str) -> ToolsetRow | None:
        row = await self.db.fetchone(f"SELECT {_COLS} FROM toolsets WHERE id = ?", (toolset_id,))
        return _toolset(row) if row is not None else None

    async def all(self, *, include_deleted: bool = False) -> list[ToolsetRow]:
        """Live toolsets (and soft-deleted ones too with ``include_deleted``), by name."""
        where = "" if include_deleted else " WHERE soft_deleted_at IS NULL"
        return [_toolset(r) for r in await self.db.fetchall(f"SELECT {_COLS} FROM toolsets{where} ORDER BY name, id")]

    async def set_soft_deleted(self, toolset_id: str, at: str | None) -> None:
        """Hide the toolset from ``at`` on (None: bring it back as it was)."""
        async with self.db.write(CATALOG) as w:
            await w.execute("UPDATE toolsets SET soft_deleted_at = ? WHERE id = ?", (at, toolset_id))

    async def deleted_before(self, cutoff: str) -> list[ToolsetRow]:
        """The toolsets soft-deleted before ``cutoff`` (UTC, as ``now()`` writes it): due for the reaper."""
        rows = await self.db.fetchall(
            f"SELECT {_COLS} FROM toolsets WHERE soft_deleted_at IS NOT NULL AND soft_deleted_at < ? "
            "ORDER BY soft_deleted_at", (cutoff,))
        return [_toolset(r) for r in rows]

    async def page(self, limit: int, after: tuple[str, str] | None, *, ids: list[str] | None = None,
                   enabled_only: bool = False, include_deleted: bool = False) -> list[ToolsetRow]:
        """Up to ``limit`` toolsets past ``after`` in (name, id) order (a keyset page);
        ``ids``: only these; soft-deleted ones only with ``include_deleted``."""
        terms: list[str] = []
        params: list[Any] = []
        if after is not None:
            terms.append("(name, id) > (?, ?)")
            params.extend(after)
        if ids is not None:
            terms.append(f"id IN ({', '.join('?' * len(ids))})")
            params.extend(ids)
        if enabled_only:
            terms.append("enabled = 1")
        if not include_deleted:
            terms.append("soft_deleted_at IS NULL")
        where = f" WHERE {' AND '.join(terms)}" if terms else ""
        rows = await self.db.fetchall(f"SELECT {_COLS} FROM toolsets{where} ORDER BY name, id LIMIT ?",
                                      (*params, limit))
        return [_toolset(r) for r in rows]

    async def set_enabled(self, toolset_id: str, enabled: bool, stamp: str) -> None:
        async with self.db.write(CATALOG) as w:
            await w.execute("UPDATE toolsets SET enabled = ?, updated_at = ? WHERE id = ?",
                            (int(enabled), stamp, toolset_id))

    async def delete(self, toolset_id: str) -> None:
        async with self.db.write(CATALOG) as w:  # files, tools, overrides and servers cascade
            await w.execute("DELETE FROM toolsets WHERE id = ?", (toolset_id,))

    async def files(self, toolset_id: str) -> list[ToolsetFile]:
        rows = await self.db.fetchall(
            "SELECT path, kind, sha256, size, stored_path FROM toolset_files WHERE toolset_id = ? ORDER BY path",
            (toolset_id,))
        return [ToolsetFile(path=r["path"], kind=r["kind"], sha256=r["sha256"], size=r["size"],
                            stored_path=r["stored_path"]) for r in rows]

    async def tools(self, toolset_id: str, *, include_unavailable: bool = False) -> list[StoredTool]:
        """The toolset's tools as declared now; ``include_unavailable``: those kept after their
        provider went away too (their config values stay)."""
        rows = await self.db.fetchall(
            f"SELECT {_STORED_COLS} FROM tools WHERE toolset_id = ? AND (? OR unavailable_reason IS NULL) "
            "ORDER BY rowid", (toolset_id, int(include_unavailable)))
        return [_stored(r) for r in rows]

    async def config_schema(self, toolset_id: str) -> dict[str, Any]:
        """The toolset-level config_schema, as stored (seed 004)."""
        row = await self.db.fetchone("SELECT config_schema FROM toolsets WHERE id = ?", (toolset_id,))
        return msgspec.json.decode(row["config_schema"]) if row is not None and row["config_schema"] else {}

    async def limits(self, toolset_id: str) -> dict[str, Any] | None:
        """The toolset-level constraints and sandbox its manifest declares (a sandbox.policy.Patch as data)."""
        row = await self.db.fetchone("SELECT limits FROM toolsets WHERE id = ?", (toolset_id,))
        return msgspec.json.decode(row["limits"]) if row is not None and row["limits"] else None

    async def overrides(self, toolset_id: str) -> list[OverrideRow]:
        return await read_overrides(self.db, toolset_id)

    async def write_install(self, new: Install, *, replace: bool) -> None:
        """Make ``new`` the toolset's current state in one transaction. On ``replace`` the old
        rows go, except the overrides the user made (they outlive upgrades, seed 001) and the tools
        the new version no longer declares that have such an override or past calls: those stay,
        marked unavailable (seed 002: never deleted automatically)."""
        t = new.toolset
        async with self.db.write(CATALOG) as w:
            kept: list[Any] = []
            before: dict[str, StoredTool] = {}
            code_changed = False
            if replace:
                kept = await _left_behind(w, t.id, {s.tool_id for s in new.tools})
                cursor = await w.execute(f"SELECT {_STORED_COLS} FROM tools WHERE toolset_id = ?", (t.id,))
                before = {r["tool_id"]: _stored(r) for r in await cursor.fetchall()}
                cursor = await w.execute("SELECT path, kind, sha256 FROM toolset_files WHERE toolset_id = ?", (t.id,))
                files = {(r["path"], r["kind"], r["sha256"]) for r in await cursor.fetchall()}
                code_changed = ({f for f in files if f[1] == "python"}
                                != {(f.path, f.kind, f.sha256) for f in new.files if f.kind == "python"})
                # toolset.yaml is one of the files: the same files are the same toolset, a
                # reload or re-import of it is no structural change.
                same = files == {(f.path, f.kind, f.sha256) for f in new.files}
                for table in ("toolset_files", "tools"):
                    await w.execute(f"DELETE FROM {table} WHERE toolset_id = ?", (t.id,))
                await mcp_servers.delete_of_toolset(w, t.id)
                await w.execute("DELETE FROM tool_overrides WHERE toolset_id = ? AND origin = 'manifest'", (t.id,))
                await w.execute(
                    "UPDATE toolsets SET name=?, version=?, description=?, source_type=?, source_ref=?, "
                    "manifest_version=?, updated_at=?, files_dir=?, config_schema=?, limits=?, "
                    "modified_at=CASE WHEN ? AND modified_at != '' THEN modified_at ELSE ? END WHERE id=?",
                    (t.name, t.version, t.description, t.source_type, t.source_ref, new.manifest_version,
                     new.updated_at, t.files_dir, _json(new.config_schema), _opt_json(new.limits), int(same),
                     new.updated_at, t.id))
            else:
                await w.execute(
                    "INSERT INTO toolsets (id, name, version, description, enabled, user_mcp, installed_at, "
                    "updated_at, source_type, source_ref, manifest_version, files_dir, config_schema, modified_at, "
                    "limits) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (t.id, t.name, t.version, t.description, int(t.enabled), int(t.user_mcp), t.installed_at,
                     new.updated_at, t.source_type, t.source_ref, new.manifest_version, t.files_dir,
                     _json(new.config_schema), new.updated_at, _opt_json(new.limits)))
            await w.executemany(
                "INSERT INTO toolset_files (toolset_id, path, kind, sha256, size, stored_path) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(t.id, f.path, f.kind, f.sha256, f.size, f.stored_path) for f in new.files])
            # Declared tools (those whose code vanished included, with their reason), with their stamps.
            await insert_tools(w, t.id, [_stamped(s, before.get(s.tool_id), code_changed, new.updated_at)
                                         for s in new.tools])
            reason = (f"no longer in the toolset {t.id!r} (version {t.version or '?'}); "
                      "its override and past calls are kept")
            await w.executemany(
                f"INSERT INTO tools ({', '.join(_TOOL_COLS)}, unavailable_reason) "
                f"VALUES ({', '.join('?' * (len(_TOOL_COLS) + 1))})",
                [(*(k[c] for c in _TOOL_COLS), k["unavailable_reason"] or reason) for k in kept])
            cursor = await w.execute(
                "SELECT tool_id FROM tool_overrides WHERE toolset_id = ? AND origin = 'user'", (t.id,))
            users = {r["tool_id"] for r in await cursor.fetchall()}
            await w.executemany(
                f"INSERT INTO tool_overrides (id, toolset_id, tool_id, {', '.join(OVERRIDE_FIELDS)}, updated_at, "
                f"origin) VALUES (lower(hex(randomblob(16))), ?, ?, {'?, ' * len(OVERRIDE_FIELDS)}?, 'manifest')",
                [(t.id, o.tool_id, *override_values(msgspec.structs.asdict(o)).values(), new.updated_at)
                 for o in new.overrides if o.tool_id not in users])
            await mcp_servers.insert(w, new.servers, new.updated_at)
            await toolset_sources.replace(w, t.id, new.source)


_TOOL_COLS = ("tool_id", "toolset_id", "provider", "name", "description", "input_schema", "requires_confirmation",
              "enabled", "entrypoint", "config", "slug", "version", "current", "tags", "created_at", "modified_at")


async def _left_behind(w: aiosqlite.Connection, toolset_id: str, declared: set[str]) -> list[Any]:
    """The toolset's stored tools that ``declared`` leaves out and that the user would lose
    something with: an override they made, or past calls (inside the caller's write, before the
    old rows go)."""
    cursor = await w.execute(
        f"SELECT {', '.join(_TOOL_COLS)}, unavailable_reason FROM tools t WHERE toolset_id = ? AND ("
        "EXISTS (SELECT 1 FROM tool_overrides o WHERE o.toolset_id = t.toolset_id AND o.tool_id = t.tool_id "
        "AND o.origin = 'user') OR EXISTS (SELECT 1 FROM tool_calls c WHERE c.tool_id = t.tool_id)) ORDER BY rowid",
        (toolset_id,))
    return [r for r in await cursor.fetchall() if r["tool_id"] not in declared]
