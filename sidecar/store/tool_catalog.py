"""The tool catalog as stored: tools with their toolset's state and the override of each, read
together; the built-in rows; and the overrides the user sets (seed 001)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .db import CATALOG, Database
from .rows import json_text as _json
from .rows import now
from .toolsets import OVERRIDE_COLS, OverrideRow, override_of, override_values, read_overrides

Provider = Literal["builtin", "python", "http"]

_decode = msgspec.json.decode


class CatalogRow(msgspec.Struct, kw_only=True):
    """A stored tool joined with its toolset and its override (none applied yet)."""

    tool_id: str
    toolset_id: str | None  # None for built-ins
    provider: Provider
    name: str
    description: str
    input_schema: dict[str, Any] | None
    requires_confirmation: bool
    enabled: bool  # the tool's own switch (built-ins: the user's choice)
    entrypoint: str | None
    config: dict[str, Any]  # timeout, needs_workspace, a built-in's default renderer
    toolset_enabled: bool | None  # None for built-ins
    files_dir: str | None
    override: OverrideRow | None
    toolset_schema: dict[str, Any] = {}  # the toolset-level config fields (seed 004)
    unavailable_reason: str | None = None  # its provider went away (seed 002); kept, shown, not run
    toolset_deleted_at: str | None = None  # its toolset is soft-deleted (toolsets/delete)
    slug: str = ""  # seed 002 (sidecar/tools/slugs.py)
    version: str = "1"
    current: bool = True  # the version `+slug` means
    tags: list[str] = []
    created_at: str = ""
    modified_at: str = ""
    # Seed 004's limits by layer (sandbox.policy.Patch as data; tools.config holds the tool's own).
    toolset_limits: dict[str, Any] | None = None  # the manifest's, for the whole toolset
    user_toolset_limits: dict[str, Any] | None = None  # the user's, for the whole toolset
    user_limits: dict[str, Any] | None = None  # the user's, for this tool


class BuiltinRow(msgspec.Struct, kw_only=True):
    tool_id: str
    name: str
    description: str
    input_schema: dict[str, Any]
    requires_confirmation: bool
    config: dict[str, Any]
    slug: str


_SQL = f"""
SELECT t.tool_id, t.toolset_id, t.provider, t.name, t.description, t.input_schema, t.requires_confirmation,
       t.enabled, t.entrypoint, t.config, ts.enabled AS toolset_enabled, ts.files_dir,
       ts.config_schema AS toolset_schema, t.unavailable_reason, ts.soft_deleted_at AS toolset_deleted_at,
       t.slug, t.version, t.current, t.tags, t.created_at, t.modified_at, ts.limits AS toolset_limits,
       (SELECT l.limits FROM tool_limits l WHERE l.toolset_id = t.toolset_id AND l.tool_id = '') AS user_toolset_limits,
       (SELECT l.limits FROM tool_limits l WHERE l.toolset_id = t.toolset_id AND l.tool_id = t.tool_id) AS user_limits,
       {", ".join(f"o.{c} AS o_{c}" for c in OVERRIDE_COLS)}
FROM tools t
LEFT JOIN tool_overrides o ON o.toolset_id = t.toolset_id AND o.tool_id = t.tool_id
LEFT JOIN toolsets ts ON ts.id = t.toolset_id
"""

def _row(r: Any) -> CatalogRow:
    override = override_of({c: r[f"o_{c}"] for c in OVERRIDE_COLS}) if r["o_tool_id"] is not None else None
    return CatalogRow(
        tool_id=r["tool_id"], toolset_id=r["toolset_id"], provider=r["provider"], name=r["name"],
        description=r["description"],
        input_schema=_decode(r["input_schema"]) if r["input_schema"] else None,
        requires_confirmation=bool(r["requires_confirmation"]), enabled=bool(r["enabled"]),
        entrypoint=r["entrypoint"], config=_decode(r["config"] or "{}"),
        toolset_enabled=None if r["toolset_enabled"] is None else bool(r["toolset_enabled"]),
        files_dir=r["files_dir"], override=override,
        toolset_schema=_decode(r["toolset_schema"]) if r["toolset_schema"] else {},
        unavailable_reason=r["unavailable_reason"], toolset_deleted_at=r["toolset_deleted_at"],
        slug=r["slug"], version=r["version"], current=bool(r["current"]), tags=_decode(r["tags"] or "[]"),
        created_at=r["created_at"], modified_at=r["modified_at"],
        toolset_limits=_decode(r["toolset_limits"]) if r["toolset_limits"] else None,
        user_toolset_limits=_decode(r["user_toolset_limits"]) if r["user_toolset_limits"] else None,
        user_limits=_decode(r["user_limits"]) if r["user_limits"] else None)


class ToolCatalogRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def tool(self, tool_id: str) -> CatalogRow | None:
        row = await self.db.fetchone(_SQL + " WHERE t.tool_id = ?", (tool_id,))
        return _row(row) if row is not None else None

    async def of_toolset(self, toolset_id: str) -> list[CatalogRow]:
        return [_row(r) for r in await self.db.fetchall(_SQL + " WHERE t.toolset_id = ? ORDER BY t.rowid",
                                                        (toolset_id,))]

    async def some(self, tool_ids: list[str]) -> list[CatalogRow]:
        """The stored ones of ``tool_ids`` (a page of search hits), in no particular order; none of a
        soft-deleted toolset."""
        found: list[CatalogRow] = []
        for at in range(0, len(tool_ids), 500):  # under SQLite's limit of bound parameters
            chunk = tool_ids[at:at + 500]
            found += [_row(r) for r in await self.db.fetchall(
                _SQL + f" WHERE t.tool_id IN ({', '.join('?' * len(chunk))}) AND ts.soft_deleted_at IS NULL", chunk)]
        return found

    async def all(self) -> list[CatalogRow]:
        """Every stored tool but those of soft-deleted toolsets."""
        return [_row(r) for r in await self.db.fetchall(
            _SQL + " WHERE ts.soft_deleted_at IS NULL ORDER BY t.toolset_id, t.rowid")]

    async def page(self, limit: int, after: str | None, *, toolset_ids: list[str] | None = None,
                   builtins: bool = True, enabled_only: bool = False) -> list[CatalogRow]:
        """Up to ``limit`` tools with ids past ``after``, by id (a keyset page on the primary key),
        none of a soft-deleted toolset;
        ``toolset_ids``: only their tools (and the built-ins if ``builtins``); ``enabled_only``:
        only tools enabled themselves, in an enabled toolset and not switched off by an override."""
        terms: list[str] = []
        params: list[Any] = []
        if after is not None:
            terms.append("t.tool_id > ?")
            params.append(after)
        if toolset_ids is not None:
            within = [f"t.toolset_id IN ({', '.join('?' * len(toolset_ids))})"] if toolset_ids else []
            terms.append(f"({' OR '.join([*within, *(['t.toolset_id IS NULL'] if builtins else [])]) or '0'})")
            params.extend(toolset_ids)
        if enabled_only:
            terms.append("t.enabled = 1 AND coalesce(ts.enabled, 1) = 1 AND coalesce(o.enabled, 1) = 1 "
                         "AND t.unavailable_reason IS NULL")
        terms.append("ts.soft_deleted_at IS NULL")  # a deleted toolset's tools are in no list
        where = f" WHERE {' AND '.join(terms)}" if terms else ""
        return [_row(r) for r in await self.db.fetchall(f"{_SQL}{where} ORDER BY t.tool_id LIMIT ?", (*params, limit))]

    async def has_tool(self, toolset_id: str, tool_id: str) -> bool:
        found = await self.db.fetchone("SELECT 1 FROM tools WHERE tool_id = ? AND toolset_id = ?",
                                       (tool_id, toolset_id))
        return found is not None

    async def by_slug(self, slug: str, version: str | None) -> list[tuple[str, bool]]:
        """(tool id, current) of every stored tool with the slug (and version, when given)."""
        rows = await self.db.fetchall(
            "SELECT tool_id, current FROM tools WHERE slug = ?" + (" AND version = ?" if version is not None else "")
            + " ORDER BY toolset_id, rowid", (slug,) if version is None else (slug, version))
        return [(r["tool_id"], bool(r["current"])) for r in rows]

    # -- built-ins ---------------------------------------------------------------------------

    async def builtins(self) -> list[BuiltinRow]:
        rows = await self.db.fetchall(
            "SELECT tool_id, name, description, input_schema, requires_confirmation, config, slug FROM tools "
            "WHERE provider = 'builtin'")
        return [BuiltinRow(tool_id=r["tool_id"], name=r["name"], description=r["description"],
                           input_schema=_decode(r["input_schema"] or "{}"),
                           requires_confirmation=bool(r["requires_confirmation"]),
                           config=_decode(r["config"] or "{}"), slug=r["slug"]) for r in rows]

    async def builtins_gone(self) -> dict[str, str]:
        """The built-ins kept from earlier builds: tool id -> why it is unavailable."""
        rows = await self.db.fetchall(
            "SELECT tool_id, unavailable_reason FROM tools "
            "WHERE provider = 'builtin' AND unavailable_reason IS NOT NULL")
        return {r["tool_id"]: r["unavailable_reason"] for r in rows}

    async def replace_builtins(self, gone: list[str], wanted: list[BuiltinRow], reason: str) -> None:
        """Store ``wanted`` as this build's built-ins (keeping each one's ``enabled`` and
        ``created_at``; ``modified_at`` moves when the definition changed) and mark ``gone``
        unavailable for ``reason``: the row stays, with the user's choice (seed 002)."""
        stamp = now()
        async with self.db.write(CATALOG) as w:
            await w.executemany("UPDATE tools SET unavailable_reason = ? WHERE tool_id = ? AND provider = 'builtin'",
                                [(reason, k) for k in gone])
            await w.executemany(
                "INSERT INTO tools (tool_id, provider, name, description, input_schema, requires_confirmation, "
                "config, slug, created_at, modified_at) VALUES (?, 'builtin', ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tool_id) DO UPDATE SET "
                "modified_at = CASE WHEN (name, description, input_schema, requires_confirmation, config) IS "
                "(excluded.name, excluded.description, excluded.input_schema, excluded.requires_confirmation, "
                "excluded.config) THEN modified_at ELSE excluded.modified_at END, "
                "name = excluded.name, description = excluded.description, input_schema = excluded.input_schema, "
                "requires_confirmation = excluded.requires_confirmation, config = excluded.config, "
                "unavailable_reason = NULL, slug = excluded.slug",
                [(b.tool_id, b.name, b.description, _json(b.input_schema), int(b.requires_confirmation),
                  _json(b.config), b.slug, stamp, stamp) for b in wanted])

    async def is_builtin(self, tool_id: str) -> bool:
        found = await self.db.fetchone("SELECT 1 FROM tools WHERE tool_id = ? AND provider = 'builtin'", (tool_id,))
        return found is not None

    async def set_builtin_enabled(self, tool_id: str, enabled: bool) -> None:
        async with self.db.write(CATALOG) as w:
            await w.execute("UPDATE tools SET enabled = ? WHERE tool_id = ? AND provider = 'builtin'",
                            (int(enabled), tool_id))

    # -- overrides ---------------------------------------------------------------------------

    async def overrides(self, toolset_id: str) -> dict[str, OverrideRow]:
        """The toolset's overrides by the key they are stored under."""
        return {o.tool_id: o for o in await read_overrides(self.db, toolset_id)}

    async def pattern_overrides(self) -> dict[str, list[OverrideRow]]:
        """Every override stored under a pattern (a key holding * or ?), by toolset."""
        rows = await self.db.fetchall(
            f"SELECT toolset_id, {', '.join(OVERRIDE_COLS)} FROM tool_overrides WHERE tool_id GLOB '*[*?]*' "
            "ORDER BY toolset_id, tool_id")
        found: dict[str, list[OverrideRow]] = {}
        for r in rows:
            found.setdefault(r["toolset_id"], []).append(override_of(r))
        return found

    async def override(self, toolset_id: str, key: str) -> OverrideRow | None:
        found = await read_overrides(self.db, toolset_id, key)
        return found[0] if found else None

    async def set_override(self, toolset_id: str, key: str, changes: dict[str, Any]) -> None:
        """Upsert the user's override of one tool; ``changes`` holds only the fields to change
        (a None value clears that field). The override becomes the user's: upgrades keep it."""
        values = override_values(changes)
        stamp = now()
        async with self.db.write(CATALOG) as w:
            await w.execute(
                "INSERT INTO tool_overrides (id, toolset_id, tool_id, updated_at, origin) "
                "VALUES (lower(hex(randomblob(16))), ?, ?, ?, 'user') ON CONFLICT (toolset_id, tool_id) DO NOTHING",
                (toolset_id, key, stamp))
            sets = "".join(f"{k} = ?, " for k in values)  # names from OVERRIDE_FIELDS only
            await w.execute(
                f"UPDATE tool_overrides SET {sets}origin = 'user', updated_at = ? WHERE toolset_id = ? AND tool_id = ?",
                (*values.values(), stamp, toolset_id, key))
