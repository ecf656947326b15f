"""Installing, listing, exporting and removing toolsets.

Files of an install go to a fresh revision folder (``toolsets/<id>/<revision>/``) and one database
transaction makes it current, so a failed import leaves no rows and no files, and an upgrade never
leaves a half-replaced folder behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..api.base import wire_name
from ..api.errors import Conflict, InvalidBundle, InvalidParams, NotFound
from ..store import CATALOG, Database
from ..store.rows import now
from .. import secrets

if TYPE_CHECKING:
    from ..runtime.workers import WorkerHost
    from .bundle import Bundle
    from .manifest import Manifest

log = logging.getLogger("sidecar.toolsets")


@dataclass
class ToolsetRow:
    id: str
    name: str
    version: str
    description: str
    enabled: bool
    user_mcp: bool
    source_type: str
    source_ref: str | None
    installed_at: str
    files_dir: str | None


_COLS = "id, name, version, description, enabled, user_mcp, source_type, source_ref, installed_at, files_dir"


def _toolset(row: Any) -> ToolsetRow:
    return ToolsetRow(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]), row[6], row[7], row[8], row[9])


class ToolsetService:
    def __init__(self, db: Database, data_dir: Path, workers: WorkerHost,
                 on_change: Callable[[str], Awaitable[None]]) -> None:
        self.db = db
        self.root = data_dir / "toolsets"
        self.workers = workers
        self._lock = anyio.Lock()  # one install/uninstall at a time
        # Called with a toolset id after it was installed, upgraded, switched or uninstalled (the
        # MCP host and the authoring loop follow the toolsets this way).
        self._on_change = on_change

    async def get(self, toolset_id: str) -> ToolsetRow:
        row = await self.db.fetchone(f"SELECT {_COLS} FROM toolsets WHERE id = ?", (toolset_id,))
        if row is None:
            raise NotFound("toolset", toolset_id)
        return _toolset(row)

    async def list(self) -> list[ToolsetRow]:
        return [_toolset(r) for r in await self.db.fetchall(f"SELECT {_COLS} FROM toolsets ORDER BY name, id")]

    async def set_enabled(self, toolset_id: str, enabled: bool) -> ToolsetRow:
        await self.get(toolset_id)
        async with self.db.write(CATALOG) as w:
            await w.execute("UPDATE toolsets SET enabled = ?, updated_at = ? WHERE id = ?",
                            (int(enabled), now(), toolset_id))
        await self._changed(toolset_id)
        return await self.get(toolset_id)

    # -- install -----------------------------------------------------------------------------

    async def install(self, source: str, *, replace: bool = False) -> ToolsetRow:
        from . import bundle  # zipfile and ast: loaded on first use, not at start-up

        try:
            b = await anyio.to_thread.run_sync(bundle.read, source)
        except bundle.BundleError as exc:
            raise InvalidBundle(exc.path, exc.reason) from None
        m = b.manifest
        async with self._lock:
            existing = await self.db.fetchone("SELECT user_mcp, files_dir FROM toolsets WHERE id = ?", (m.id,))
            if existing is not None and existing[0]:
                raise Conflict("id taken by an MCP server",
                               f"{m.id!r} is the id of an MCP server you added; rename the toolset")
            if existing is not None and not replace:
                raise Conflict("already installed",
                               f"a toolset {m.id!r} is already installed; pass replace: true to upgrade it")
            revision = self.root / m.id / uuid.uuid4().hex[:12]
            await anyio.to_thread.run_sync(_write_files, revision, b.files)
            try:
                described = await self._describe(m, revision)
                await self._write_rows(b, revision, described, replace=existing is not None)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(shutil.rmtree, revision, True)
                raise
            if existing is not None:
                await self.workers.restart(m.id)  # running workers still hold the old code
                if existing[1]:
                    await anyio.to_thread.run_sync(shutil.rmtree, existing[1], True)
        await self._changed(m.id)
        return await self.get(m.id)

    async def add_user_server(self, server: dict[str, Any]) -> ToolsetRow:
        """mcpServers/add: a userMcp toolset whose id is the server's, holding only that server.
        ``server`` is a manifest's mcp_servers entry; unset (None or empty) fields are dropped."""
        from .bundle import Bundle
        from .manifest import ManifestError, from_data

        server_id = server.get("id")
        try:
            parsed = from_data({"manifest_version": "1", "id": server_id, "name": server_id,
                                "mcp_servers": [_drop_empty(server)]})
        except ManifestError as exc:
            raise InvalidParams("params" + _wire_path(exc.path), exc.reason) from None
        async with self._lock:
            if await self.db.fetchone("SELECT 1 FROM toolsets WHERE id = ?", (server_id,)) is not None:
                raise Conflict("already installed",
                               f"a server or toolset {server_id!r} exists already; choose another id")
            bundle = Bundle(Path(), "user", {}, parsed)
            await self._write_rows(bundle, None, {}, replace=False)
        await self._changed(server_id)
        return await self.get(server_id)

    async def _changed(self, toolset_id: str) -> None:
        await self._on_change(toolset_id)

    async def _describe(self, m: Manifest, revision: Path) -> dict[str, dict[str, Any]]:
        """Load the tools in a worker once, for what only their code says (schemas inferred from
        type hints, @tool names); a module that fails to import rejects the bundle here rather
        than at the first call."""
        if not m.tools:
            return {}
        from ..runtime.workers import ToolFailure, ToolsetWorkers

        pool = ToolsetWorkers(m.id, revision, self.workers.limits)
        try:
            found = await pool.describe({t.id: t.entrypoint for t in m.tools})
        except ToolFailure as exc:
            raise InvalidBundle("tools", f"the toolset's worker could not load its tools: {exc.message}") from None
        finally:
            with anyio.CancelScope(shield=True):
                await pool.aclose()
        described = {}
        for i, t in enumerate(m.tools):
            outcome = found.get(t.id) or {"error": "the worker did not report this tool"}
            if "error" in outcome:
                raise InvalidBundle(f"tools[{i}].entrypoint", outcome["error"])
            described[t.id] = outcome["ok"]
        return described

    async def _write_rows(
        self, b: Bundle, revision: Path | None, described: dict[str, dict[str, Any]], *, replace: bool
    ) -> None:
        from .bundle import kind_of

        m: Manifest = b.manifest
        stamp = now()
        user = b.source_type == "user"  # mcpServers/add: no files, no source to follow
        source_ref, files_dir = (None, None) if user else (str(b.source), str(revision))
        async with self.db.write(CATALOG) as w:
            if replace:
                for table in ("toolset_files", "tools", "toolset_mcp_servers"):
                    await w.execute(f"DELETE FROM {table} WHERE toolset_id = ?", (m.id,))
                await w.execute("DELETE FROM tool_overrides WHERE toolset_id = ? AND origin = 'manifest'", (m.id,))
                await w.execute(
                    "UPDATE toolsets SET name=?, version=?, description=?, source_type=?, source_ref=?, "
                    "manifest_version=?, updated_at=?, files_dir=? WHERE id=?",
                    (m.name, m.version, m.description, b.source_type, source_ref, m.manifest_version,
                     stamp, files_dir, m.id))
            else:
                await w.execute(
                    "INSERT INTO toolsets (id, name, version, description, enabled, user_mcp, installed_at, "
                    "updated_at, source_type, source_ref, manifest_version, files_dir) "
                    "VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
                    (m.id, m.name, m.version, m.description, int(user), stamp, stamp, b.source_type,
                     source_ref, m.manifest_version, files_dir))
            await w.executemany(
                "INSERT INTO toolset_files (toolset_id, path, kind, sha256, size, stored_path) VALUES (?, ?, ?, ?, ?, ?)",
                [(m.id, path, kind_of(path), hashlib.sha256(data).hexdigest(), len(data),
                  str(revision / path)) for path, data in b.files.items()])
            await w.executemany(
                "INSERT INTO tools (tool_id, toolset_id, provider, name, description, input_schema, "
                "requires_confirmation, enabled, entrypoint, config) VALUES (?, ?, 'python', ?, ?, ?, ?, 1, ?, ?)",
                [_tool_row(m.id, t, described.get(t.id, {})) for t in m.tools])
            user = {r[0] for r in await (await w.execute(
                "SELECT tool_id FROM tool_overrides WHERE toolset_id = ? AND origin = 'user'", (m.id,))).fetchall()}
            declared = {t.id for t in m.tools}
            rows = []
            for o in b.parsed.overrides:
                key = f"{m.id}:{o.tool_id}" if o.tool_id in declared else o.tool_id
                if key in user:
                    continue  # the user's own override of this tool wins over the new manifest
                rows.append((uuid.uuid4().hex, m.id, key, o.renderer,
                             json.dumps(o.renderer_config) if o.renderer_config is not None else None,
                             o.name_override, o.description_override, _opt_bool(o.requires_confirmation),
                             _opt_bool(o.enabled), stamp))
            await w.executemany(
                "INSERT INTO tool_overrides (id, toolset_id, tool_id, renderer, renderer_config, name_override, "
                "description_override, requires_confirmation, enabled, updated_at, origin) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'manifest')", rows)
            await w.executemany(
                "INSERT INTO toolset_mcp_servers (id, toolset_id, server_type, enabled, command, args, cwd, url, "
                "headers, env, requires_confirmation, options, created_at) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(s.id, m.id, s.type, s.command, json.dumps(s.args), s.cwd, s.url, json.dumps(s.headers),
                  json.dumps(s.env), int(s.requires_confirmation),
                  json.dumps({k: v for k, v in (("connect_timeout", s.connect_timeout),
                                                 ("call_timeout", s.call_timeout)) if v}), stamp)
                 for s in m.mcp_servers])

    # -- uninstall ---------------------------------------------------------------------------

    async def uninstall(self, toolset_id: str) -> None:
        async with self._lock:
            toolset = await self.get(toolset_id)
            await self.workers.discard(toolset_id)
            async with self.db.write(CATALOG) as w:
                await w.execute("DELETE FROM toolsets WHERE id = ?", (toolset_id,))
            await anyio.to_thread.run_sync(shutil.rmtree, self.root / toolset.id, True)
        await self._changed(toolset_id)

    # -- export ------------------------------------------------------------------------------

    async def export(self, toolset_id: str, dest: str) -> tuple[Path, int, str]:
        toolset = await self.get(toolset_id)
        target = Path(dest)
        if not target.is_absolute() or target.suffix.lower() != ".zip":
            raise InvalidParams("params.path", "give an absolute path ending in .zip")
        if not target.parent.is_dir():
            raise InvalidParams("params.path", f"the folder {target.parent} does not exist")
        manifest = await self.manifest_from_rows(toolset)
        files = await self.db.fetchall(
            "SELECT path, stored_path FROM toolset_files WHERE toolset_id = ? ORDER BY path", (toolset_id,))
        data = await anyio.to_thread.run_sync(_pack, manifest, [(r[0], r[1]) for r in files], target)
        return target, len(data), hashlib.sha256(data).hexdigest()

    async def server_rows(self, toolset_id: str) -> list[Any]:
        """(id, type, command, args, cwd, url, headers, env, requires_confirmation, options,
        enabled) of the toolset's MCP servers, in manifest order."""
        return await self.db.fetchall(
            "SELECT id, server_type, command, args, cwd, url, headers, env, requires_confirmation, "
            "options, enabled FROM toolset_mcp_servers WHERE toolset_id = ? ORDER BY rowid", (toolset_id,))

    async def manifest_from_rows(self, toolset: ToolsetRow) -> dict[str, Any]:
        """toolset.yaml regenerated from the database, secrets turned into ${VAR} placeholders."""
        tid = toolset.id
        tools = await self.db.fetchall(
            "SELECT tool_id, name, description, entrypoint, input_schema, requires_confirmation, config "
            "FROM tools WHERE toolset_id = ? ORDER BY rowid", (tid,))
        overrides = await self.db.fetchall(
            "SELECT tool_id, renderer, renderer_config, name_override, description_override, "
            "requires_confirmation, enabled FROM tool_overrides WHERE toolset_id = ? ORDER BY tool_id", (tid,))
        servers = await self.server_rows(tid)
        out: dict[str, Any] = {"manifest_version": "1", "id": tid, "name": toolset.name,
                               "version": toolset.version, "description": toolset.description}
        out["tools"] = [_drop_empty({
            "id": r[0].partition(":")[2], "name": r[1], "description": r[2], "entrypoint": r[3],
            "input_schema": json.loads(r[4]) if r[4] else None,
            "requires_confirmation": bool(r[5]) or None,
            "timeout": json.loads(r[6] or "{}").get("timeout")}) for r in tools]
        out["tool_overrides"] = [_drop_empty({
            "tool_id": r[0].removeprefix(f"{tid}:"), "renderer": r[1],
            "renderer_config": json.loads(r[2]) if r[2] else None, "name_override": r[3],
            "description_override": r[4], "requires_confirmation": _from_opt(r[5]),
            "enabled": _from_opt(r[6])}) for r in overrides]
        out["mcp_servers"] = [_drop_empty({
            "id": r[0], "type": r[1], "command": r[2],
            "args": secrets.placeholder_args(json.loads(r[3])), "cwd": r[4],
            "url": secrets.placeholder_url(r[5]) if r[5] else None,
            "headers": secrets.placeholder_map(json.loads(r[6])),
            "env": secrets.placeholder_map(json.loads(r[7])),
            "requires_confirmation": bool(r[8]) or None, **json.loads(r[9] or "{}")}) for r in servers]
        return {k: v for k, v in out.items() if v != []}


def _wire_path(manifest_path: str) -> str:
    """``mcp_servers[0].url`` -> ``.url``: where mcpServers/add's params hold that field."""
    place = manifest_path.removeprefix("mcp_servers[0]")
    if place == manifest_path:
        return "." + manifest_path if manifest_path else ""
    head, *rest = place.lstrip(".").split(".")
    return "." + ".".join([wire_name(head), *rest]) if head else ""


def _tool_row(toolset_id: str, t: Any, code: dict[str, Any]) -> tuple[Any, ...]:
    """The stored tool: what the manifest says, completed by what the code declares."""
    schema = t.input_schema if t.input_schema is not None else code.get("inputSchema")
    config: dict[str, Any] = {}
    if t.timeout or code.get("timeout"):
        config["timeout"] = t.timeout or code.get("timeout")
    if code.get("legacy"):
        config["needs_workspace"] = True  # plain f(workspace, ...) functions are handed the folder
    return (f"{toolset_id}:{t.id}", toolset_id, t.name or code.get("name") or t.id,
            t.description or code.get("description") or "",
            json.dumps(schema) if schema is not None else None,
            int(t.requires_confirmation or bool(code.get("requiresConfirmation"))), t.entrypoint,
            json.dumps(config))


def _opt_bool(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _from_opt(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def _drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in (None, {}, [], "")}


def _write_files(revision: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():  # names were checked when the bundle was read
        target = revision.joinpath(*path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _pack(manifest: dict[str, Any], files: list[tuple[str, str]], target: Path) -> bytes:
    import zipfile

    import yaml

    from .bundle import MANIFEST

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True))
        for path, stored in files:
            if path != MANIFEST:
                z.write(stored, path)
    data = buffer.getvalue()
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return data
