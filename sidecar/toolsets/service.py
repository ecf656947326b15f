"""Installing, listing, exporting and removing toolsets.

Files of an install go to a fresh revision folder (``toolsets/<id>/<revision>/``) and one database
transaction makes it current, so a failed import leaves no rows and no files, and an upgrade never
leaves a half-replaced folder behind.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec

from .. import frozen
from ..api.base import wire_name
from ..api.mcp import ServerDecl
from ..errors import BundleError, Conflict, InvalidBundle, InvalidParams, NotFound, StorageError
from ..paging import Pages
from ..sandbox import settings as sandbox_settings
from ..sandbox.policy import Patch
from ..store import Database
from ..store.mcp_servers import McpServerRepo, McpServerRow
from ..store.rows import now
from ..store.toolset_sources import SourceRow
from ..store.toolsets import Install, OverrideRow, StoredTool, ToolsetFile, ToolsetRepo, ToolsetRow
from ..tools import output as tool_output
from ..tools import slugs
from ..tools.config_schema import ConfigSchema
from ..tools.overrides import is_pattern
from ..tools.providers.python.entrypoints import importable
from ..tools.providers.python.worker import ToolFailure
from ..tools.providers.python.workers import ToolsetWorkers
from . import export as exporting
from .bundle import MANIFEST, Bundle, kind_of
from .bundle import read as read_bundle
from .export import drop_empty
from .manifest import ManifestError, Parsed, ToolDecl, check_writable_paths, of_server

READ_THREADS = 2  # bundles read at once; the others wait their turn (a read is bounded)

if TYPE_CHECKING:
    from ..api.toolsets import InspectResult, ListToolsetsParams
    from ..secrets.store import SecretStore
    from ..tools.providers.python.workers import WorkerHost
    from .manifest import Manifest

log = logging.getLogger("sidecar.toolsets")

__all__ = ["Remote", "ToolsetRow", "ToolsetService"]


@dataclass(frozen=True, slots=True)
class Remote:
    """Where a bundle being installed was downloaded from (toolsets/import {url}, toolsets/upgrade):
    kept as the toolset's source, to look for a newer bundle there."""

    url: str
    sha256: str
    size: int
    etag: str | None = None
    last_modified: str | None = None
    upgrade_of: str | None = None  # an upgrade: the bundle must still be this toolset


class ToolsetService:
    def __init__(self, db: Database, data_dir: Path, workers: WorkerHost, vault: SecretStore,
                 on_change: Callable[[str], Awaitable[None]]) -> None:
        self.db = db
        self.vault = vault  # exports write what came from it as ${NAME}; inspect says what is set
        self.repo = ToolsetRepo(db)
        self.root = data_dir / "toolsets"
        self.data_dir = data_dir  # no tool may be given it as a writable path
        self.workers = workers
        self._lock = anyio.Lock()  # one install/uninstall at a time
        # Reading a bundle is bounded (sizes, no blocking opens) but can take a second of CPU; its
        # own few threads keep a burst of imports and inspects from taking the shared pool's
        # threads, which every workspace operation needs.
        self.reads = anyio.CapacityLimiter(READ_THREADS)
        # Called with a toolset id after it was installed, upgraded, switched or uninstalled (the
        # MCP host and the authoring loop follow the toolsets this way).
        self._on_change = on_change

    async def read(self, source: str, *, tolerate_vanished: bool = False) -> Bundle:
        """The bundle at ``source``, read on one of the toolsets' own threads (a BundleError is
        InvalidBundle on the wire)."""
        reading = functools.partial(read_bundle, source, tolerate_vanished=tolerate_vanished)
        b = await anyio.to_thread.run_sync(reading, limiter=self.reads)
        check_writable_paths(b.parsed, self.data_dir)
        return b

    async def get(self, toolset_id: str) -> ToolsetRow:
        row = await self.repo.get(toolset_id)
        if row is None:
            raise NotFound("toolset", toolset_id)
        return row

    async def all(self, *, include_deleted: bool = False) -> list[ToolsetRow]:
        return await self.repo.all(include_deleted=include_deleted)

    async def writable(self, toolset_id: str, what: str) -> ToolsetRow:
        """The toolset, when ``what`` (a change inside it) may be made now: Conflict while it is
        disabled or soft-deleted (seed 002), saying what to do instead."""
        row = await self.get(toolset_id)
        frozen.refuse_changes(toolset_id, row.enabled, row.soft_deleted_at, what)
        return row

    async def page(self, p: ListToolsetsParams) -> tuple[list[ToolsetRow], str | None]:
        """toolsets/list: a keyset page by (name, id)."""
        ids = sorted(set(p.toolset_ids)) if p.toolset_ids is not None else None
        pages = Pages("toolsets/list", {"toolsetIds": ids, "includeDisabled": p.include_disabled,
                                        "includeDeleted": p.include_deleted}, tuple[str, str])
        rows = await self.repo.page(p.page_size + 1, pages.after(p.page_token), ids=ids,
                                    enabled_only=not p.include_disabled, include_deleted=p.include_deleted)
        return pages.page(rows, p.page_size, lambda t: (t.name, t.id))

    async def set_enabled(self, toolset_id: str, enabled: bool) -> ToolsetRow:
        row = await self.get(toolset_id)
        frozen.refuse_if_deleted(toolset_id, row.soft_deleted_at, "turn it on or off")
        await self.repo.set_enabled(toolset_id, enabled, now())
        await self._changed(toolset_id)
        return await self.get(toolset_id)

    # -- install -----------------------------------------------------------------------------

    async def install(self, source: str, *, replace: bool = False, remote: Remote | None = None) -> ToolsetRow:
        """Install the bundle at ``source`` (a path); ``remote``: it was downloaded from a URL."""
        # A BundleError is InvalidBundle on the wire. An upgrade keeps a tool whose code vanished.
        b = await self.read(source, tolerate_vanished=replace)
        m = b.manifest
        if remote is not None and remote.upgrade_of is not None and m.id != remote.upgrade_of:
            raise InvalidBundle(MANIFEST, f"the bundle at {remote.url} is now the toolset {m.id!r}, not "
                                          f"{remote.upgrade_of!r}; import it as a toolset of its own")
        async with self._lock:
            existing = await self.repo.get(m.id)
            if existing is None and b.vanished:
                raise next(iter(b.vanished.values()))  # a first install keeps nothing: the bundle is wrong
            if existing is not None and existing.user_mcp:
                raise Conflict("id taken by an MCP server",
                               f"{m.id!r} is the id of an MCP server you added; rename the toolset")
            if existing is not None and not replace:
                raise Conflict("already installed",
                               f"a toolset {m.id!r} is already installed; pass replace: true to upgrade it")
            if existing is not None:
                frozen.refuse_if_deleted(m.id, existing.soft_deleted_at, "upgrade it")
            revision = self.root / m.id / uuid.uuid4().hex[:12]
            try:
                await anyio.to_thread.run_sync(_write_files, revision, b.files)
                described = await self._describe(m, revision, b.vanished)
                await self._write_rows(b, revision, described, replace=existing is not None, remote=remote)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    # A refused first install leaves no folder at all, not an empty one per try.
                    await anyio.to_thread.run_sync(_remove_revision, revision, existing is None)
                raise
            if existing is not None:
                await self.workers.restart(m.id)  # running workers still hold the old code
                if existing.files_dir:
                    await anyio.to_thread.run_sync(shutil.rmtree, existing.files_dir, True)
        await self._changed(m.id)
        return await self.get(m.id)

    async def add_user_server(self, server: ServerDecl) -> ToolsetRow:
        """mcpServers/add: a userMcp toolset whose id is the server's, holding only that server."""
        parsed = _parse_user_server(server, self.data_dir)
        server_id = parsed.manifest.id
        async with self._lock:
            if await self.repo.get(server_id) is not None:
                raise Conflict("already installed",
                               f"a server or toolset {server_id!r} exists already; choose another id")
            bundle = Bundle(Path(), "user", {}, parsed)
            await self._write_rows(bundle, None, {}, replace=False)
        await self._changed(server_id)
        return await self.get(server_id)

    def checked_user_server(self, server: ServerDecl) -> ServerDecl:
        """mcpServers/update: a user's server as it would be stored, checked as mcpServers/add checks it."""
        return _parse_user_server(server, self.data_dir).manifest.mcp_servers[0]

    async def _changed(self, toolset_id: str) -> None:
        await self._on_change(toolset_id)

    # Toolsets made in the UI (user_made.py) install under the same lock and follow the same way.
    changed = _changed

    @property
    def lock(self) -> anyio.Lock:
        return self._lock

    async def _describe(self, m: Manifest, revision: Path, vanished: Collection[str] = ()) -> dict[str, dict[str, Any]]:
        """Load the tools in a worker once, for what only their code says (schemas inferred from
        type hints, @tool names); a module that fails to import rejects the bundle here rather
        than at the first call."""
        code = {t.id: importable(t.entrypoint) for t in m.tools if t.entrypoint is not None and t.id not in vanished}
        if not code:
            return {}  # no Python tools (HTTP tools are described by their manifest alone)
        pool = ToolsetWorkers(m.id, revision, self.workers.limits)
        try:
            found = await pool.describe(code)
        except ToolFailure as exc:
            raise InvalidBundle("tools", f"the toolset's worker could not load its tools: {exc.message}") from None
        finally:
            with anyio.CancelScope(shield=True):
                await pool.aclose()
        described: dict[str, dict[str, Any]] = {}
        for i, t in enumerate(m.tools):
            if t.id not in code:
                continue
            outcome = found.get(t.id) or {"error": "the worker did not report this tool"}
            if "error" in outcome:
                raise InvalidBundle(f"tools[{i}].entrypoint", outcome["error"])
            described[t.id] = outcome["ok"]
        return described

    async def _write_rows(
        self, b: Bundle, revision: Path | None, described: dict[str, dict[str, Any]], *, replace: bool,
        remote: Remote | None = None,
    ) -> None:
        m: Manifest = b.manifest
        stamp = now()
        user = b.source_type == "user"  # mcpServers/add: no files, no source to follow
        declared = {t.id for t in m.tools}
        await self.repo.write_install(Install(
            toolset=ToolsetRow(id=m.id, name=m.name, version=m.version, description=m.description, enabled=True,
                               user_mcp=user, source_type="url" if remote else b.source_type,
                               source_ref=remote.url if remote else None if user else str(b.source),
                               installed_at=stamp,
                               files_dir=None if user else str(revision)),
            manifest_version=m.manifest_version, updated_at=stamp,
            files=[ToolsetFile(path=path, kind=kind_of(path), sha256=hashlib.sha256(data).hexdigest(),
                               size=len(data), stored_path=str((revision or Path()) / path))
                   for path, data in b.files.items()],
            tools=_with_current([stored_tool(m.id, t, described.get(t.id, {}), b.vanished.get(t.id),
                                             b.parsed.tool_limits.get(t.id)) for t in m.tools]),
            overrides=[OverrideRow(tool_id=_override_key(m.id, o.tool_id, declared),
                                   renderer=o.renderer, renderer_config=o.renderer_config,
                                   name_override=o.name_override, description_override=o.description_override,
                                   requires_confirmation=o.requires_confirmation, enabled=o.enabled,
                                   origin="manifest") for o in b.parsed.overrides],
            servers=[s.row(m.id) for s in m.mcp_servers],
            config_schema=schema_data(m.config_schema),
            limits=sandbox_settings.stored(b.parsed.limits) if b.parsed.limits is not None else None,
            source=None if remote is None else SourceRow(
                toolset_id=m.id, sha256=remote.sha256, size=remote.size, etag=remote.etag,
                last_modified=remote.last_modified, fetched_at=stamp, checked_at=stamp),
        ), replace=replace)

    # -- inspect ---------------------------------------------------------------------------

    async def inspect(self, path: str) -> InspectResult:
        """What installing the bundle at `path` would add, and which of the variables its servers
        refer to are set here (the user is asked for the others)."""
        from .inspect import inspect  # the API models of the answer: loaded on first use

        found = inspect(await self.read(path), (await self.workers.sandbox.status()).mechanism)
        try:
            have = await self.vault.environ([v.name for v in found.variables])
        except StorageError:  # a locked keystore: only the environment can say
            have = os.environ
        return msgspec.structs.replace(found, variables=[
            msgspec.structs.replace(v, set=v.name in have) for v in found.variables])

    # -- soft delete (seed 002) --------------------------------------------------------------

    async def soft_delete(self, toolset_id: str) -> ToolsetRow:
        """Hide the toolset, its tools and its MCP servers (which disconnect) until ``restore``;
        nothing of it is removed: the reaper does that once the retention has passed."""
        async with self._lock:
            row = await self.get(toolset_id)
            frozen.refuse_if_deleted(toolset_id, row.soft_deleted_at, "delete it again")
            await self.repo.set_soft_deleted(toolset_id, now())
            await self.workers.discard(toolset_id)  # its Python workers stop with it
        log.info("toolset %s deleted (restorable with toolsets/restore until the reaper removes it)", toolset_id)
        await self._changed(toolset_id)
        return await self.get(toolset_id)

    async def restore(self, toolset_id: str) -> ToolsetRow:
        """Bring a soft-deleted toolset back as it was: switches, overrides, config and servers."""
        async with self._lock:
            row = await self.get(toolset_id)
            if row.soft_deleted_at is None:
                raise Conflict("not deleted", f"the toolset {toolset_id!r} is not deleted; there is nothing to restore")
            await self.repo.set_soft_deleted(toolset_id, None)
        log.info("toolset %s restored", toolset_id)
        await self._changed(toolset_id)
        return await self.get(toolset_id)

    async def deleted_before(self, cutoff: str) -> list[ToolsetRow]:
        return await self.repo.deleted_before(cutoff)

    # -- uninstall ---------------------------------------------------------------------------

    async def uninstall(self, toolset_id: str, *, deleted_before: str | None = None) -> bool:
        """Remove the toolset for good. ``deleted_before`` (the reaper): only if it is still
        soft-deleted since before then; False (and nothing removed) when it is not."""
        async with self._lock:
            if deleted_before is not None:
                found = await self.repo.get(toolset_id)
                if found is None or found.soft_deleted_at is None or found.soft_deleted_at >= deleted_before:
                    return False
            toolset = await self.get(toolset_id)
            await self.workers.discard(toolset_id)
            await self.repo.delete(toolset_id)
            await anyio.to_thread.run_sync(shutil.rmtree, self.root / toolset.id, True)
        await self._changed(toolset_id)
        return True

    # -- export ------------------------------------------------------------------------------

    async def export(self, toolset_id: str, dest: str) -> tuple[Path, int, str, list[str]]:
        toolset = await self.get(toolset_id)
        frozen.refuse_if_deleted(toolset_id, toolset.soft_deleted_at, "export it")
        return await exporting.write(self.repo, McpServerRepo(self.db), self.vault, toolset, dest)

    async def server_rows(self, toolset_id: str) -> list[McpServerRow]:
        """The toolset's MCP servers, in manifest order."""
        return await McpServerRepo(self.db).of_toolset(toolset_id)



def _parse_user_server(server: ServerDecl, data_dir: Path) -> Parsed:
    """A user's server (mcpServers/add, update or import) checked as a one-server manifest (its
    sandbox's writable folders against ``data_dir`` too); InvalidParams names the field as the
    params do."""
    try:
        parsed = of_server(server)
        check_writable_paths(parsed, data_dir)
        return parsed
    except ManifestError as exc:
        raise InvalidParams("params" + _wire_path(exc.path), exc.reason) from None


def _wire_path(manifest_path: str) -> str:
    """``mcp_servers[0].url`` -> ``.url``: where mcpServers/add's params hold that field."""
    place = manifest_path.removeprefix("mcp_servers[0]")
    if place == manifest_path:
        return "." + manifest_path if manifest_path else ""
    head, *rest = place.lstrip(".").split(".")
    return "." + ".".join([wire_name(head), *rest]) if head else ""


def stored_tool(toolset_id: str, t: ToolDecl, code: dict[str, Any], gone: BundleError | None = None,
                limits: Patch | None = None) -> StoredTool:
    """The stored tool: what the manifest says, completed by what the code declares; ``gone``:
    its code vanished (kept, unavailable for that reason); ``limits``: its constraints and sandbox
    as the manifest declares them (`Parsed.tool_limits`)."""
    schema: dict[str, Any] | None = t.input_schema if t.input_schema is not None else code.get("inputSchema")
    config: dict[str, Any] = {}
    if t.timeout or code.get("timeout"):
        config["timeout"] = t.timeout or code.get("timeout")
    if t.http is None and code.get("timeout") and (limits is None or limits.timeout_seconds is None):
        # @tool(timeout=...) is the author's word too, under what toolset.yaml says.
        limits = msgspec.structs.replace(limits or Patch(), timeout_seconds=float(code["timeout"]))
    if limits is not None and (data := sandbox_settings.stored(limits)) is not None:
        config["limits"] = data
    if (output := tool_output.stored(t.output)) is not None:
        config["output"] = output
    if code.get("outputSchema") is not None:
        config["output_schema"] = code["outputSchema"]  # from the return annotation: results are checked
    if code.get("legacy"):
        config["needs_workspace"] = True  # plain f(workspace, ...) functions are handed the folder
    if t.config_schema:
        config["config_schema"] = schema_data(t.config_schema)
    if t.trigger is not None and t.trigger.type == "cron":
        config["trigger"] = drop_empty(msgspec.to_builtins(t.trigger))  # schedules follow it (Schedules)
    if t.http is not None:
        # Stored as declared (camelCase, defaults left out): what export writes back and the runner reads.
        config["http"] = msgspec.to_builtins(t.http)
        schema = schema if schema is not None else {"type": "object", "properties": {}}
    return StoredTool(tool_id=f"{toolset_id}:{t.id}", slug=t.slug or slugs.derive(t.id),
                      version=t.version or slugs.DEFAULT_VERSION, tags=t.tags,
                      provider="http" if t.http is not None else "python", name=t.name or code.get("name") or t.id,
                      description=t.description or code.get("description") or "", entrypoint=t.entrypoint,
                      input_schema=schema,
                      requires_confirmation=t.requires_confirmation or bool(code.get("requiresConfirmation")),
                      config=config, unavailable_reason=f"its code is gone: {gone.reason}" if gone else None)


def _override_key(toolset_id: str, tool_id: str, declared: set[str]) -> str:
    """The key a manifest's override is stored under: ``toolset:tool`` for a tool it declares (and
    for a pattern of them, such as ``read_*``), else as written (``server:tool``, ``fs:*``)."""
    own = tool_id in declared or (is_pattern(tool_id) and ":" not in tool_id)
    return f"{toolset_id}:{tool_id}" if own else tool_id


def _with_current(tools: list[StoredTool]) -> list[StoredTool]:
    """The manifest's rule: of several versions of one slug, the last declared is current."""
    last = {t.slug: t.tool_id for t in tools}
    return [msgspec.structs.replace(t, current=last[t.slug] == t.tool_id) for t in tools]


def schema_data(schema: ConfigSchema) -> dict[str, Any]:
    """A config_schema as stored and exported: each field with what it sets beyond the defaults."""
    return {key: {k: v for k, v in msgspec.structs.asdict(f).items() if v is not None} for key, f in schema.items()}


def _remove_revision(revision: Path, first: bool) -> None:
    shutil.rmtree(revision, ignore_errors=True)
    if first:
        with contextlib.suppress(OSError):  # not empty: something else lives there; leave it
            revision.parent.rmdir()


def _write_files(revision: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():  # names were checked when the bundle was read
        target = revision.joinpath(*path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
