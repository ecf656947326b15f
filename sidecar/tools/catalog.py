"""Tools as the UI and models see them: stored definitions with the override layer applied on
read (seed 001), plus the MCP tools discovered live. A disabled toolset hides all its tools, and
nothing inside it can be changed until it is enabled again (seed 002)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .. import frozen
from ..api.base import wire_name
from ..api.tools import Tool
from ..errors import InvalidParams, NotFound, PermissionDenied
from ..sandbox.policy import Patch
from ..sandbox.settings import from_stored, stored
from ..store import CATALOG, Database
from ..store.tool_catalog import BuiltinRow, CatalogRow, ToolCatalogRepo
from ..store.tool_config import ConfigValue, ToolConfigRepo
from ..store.tool_limits import WHOLE_TOOLSET, ToolLimitsRepo
from ..store.toolsets import OverrideRow, ToolsetRepo, ToolsetRow
from . import limits, overrides, settings, slugs
from . import output as tool_output
from .output import BUILTIN_MAX_CHARS
from .providers import mcp as mcp_tools
from .providers.builtin import BUILTINS
from .providers.python.entrypoints import importable
from .resolved import BuiltinConfig, HttpConfig, PythonConfig, Resolved, RunConfig
from .settings import Plan, status_of

if TYPE_CHECKING:
    from ..mcp_host.host import McpHost
    from ..sandbox.runner import Sandbox

# The pseudo toolset id that names the built-in tools in tools/setOverride.
BUILTIN = "builtin"
BUILTIN_GONE = "this built-in tool is not part of this version of the app"


def _switched_on(row: CatalogRow) -> bool:
    return row.enabled and overrides.switched_on(row.override)


def unavailable_reason(row: CatalogRow) -> str | None:
    """Why the stored tool cannot run whatever its switches say: its provider went away, or its
    toolset is soft-deleted (only toolsets/get shows such a tool)."""
    if row.toolset_deleted_at is not None and row.toolset_id is not None:
        return frozen.deleted_tool_message(row.toolset_id)
    return row.unavailable_reason


def layered(row: CatalogRow, patterns: dict[str, list[OverrideRow]]) -> tuple[CatalogRow, list[str]]:
    """The row with its override combined with the toolset's ``patterns`` that match it
    (`overrides.layer`), and the keys and patterns that set something."""
    override, applied = overrides.layer(row.override, patterns.get(row.toolset_id or "", []), row.tool_id)
    return (row if override is row.override else msgspec.structs.replace(row, override=override)), applied


def view(row: CatalogRow, values: list[ConfigValue], applied: list[str] | None = None,
         mechanism: str | None = None) -> Tool:
    """The stored tool with its override applied (`overrides.apply`) and its status, given the
    config ``values`` set in its toolset; ``applied``: what `layered` said set the override;
    ``mechanism``: what confines tools here (its limits warn about what it cannot enforce)."""
    reason = unavailable_reason(row)
    tool = overrides.apply(Tool(
        id=row.tool_id, toolset_id=row.toolset_id, provider=row.provider, name=row.name,
        description=row.description, input_schema=row.input_schema,
        requires_confirmation=row.requires_confirmation,
        enabled=row.enabled and row.toolset_enabled is not False,
        renderer=row.config.get("renderer"), renderer_config=row.config.get("renderer_config"),
        output_schema=output_schema_of(row.config),
        slug=row.slug, version=row.version, current=row.current, tags=row.tags, created_at=row.created_at,
        modified_at=row.modified_at, limits=limits.view_of(row, mechanism),
    ), row.override, applied)
    missing = plan_of(row, values).missing if row.toolset_id is not None else []
    if reason is not None:  # it cannot run, whatever its switches say; they are kept for when it can
        return msgspec.structs.replace(tool, enabled=False, status="unavailable", missing_config=missing,
                                       unavailable_reason=reason)
    return msgspec.structs.replace(tool, status=status_of(row.provider, tool.enabled, missing),
                                   missing_config=missing)


def output_schema_of(config: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a stored tool's results are checked against: an HTTP tool's declared
    ``outputSchema``, a Python tool's return annotation (turned into a schema when its toolset was
    installed or reloaded); None when it has none."""
    http: dict[str, Any] = config.get("http") or {}
    return config.get("output_schema") or http.get("outputSchema")


def plan_of(row: CatalogRow, values: list[ConfigValue]) -> Plan:
    """The settings a call of the tool gets (short of secret values), from its toolset's ``values``."""
    assert row.toolset_id is not None  # (built-ins have no configuration)
    return settings.plan(row.toolset_id, row.tool_id.partition(":")[2], settings.schema_of(row.toolset_schema),
                         settings.schema_of(row.config.get("config_schema")), values)


def run_config(row: CatalogRow) -> RunConfig:
    """What the runner of the stored tool's provider needs, decoded from its row once per change
    of the catalog (a provider nothing here runs gets the common part: its call says so)."""
    config = row.config
    output, timeout = tool_output.of_config(config), config.get("timeout")
    needs_workspace = bool(config.get("needs_workspace"))
    if row.provider == "builtin":
        return BuiltinConfig(output=output, needs_workspace=needs_workspace, timeout=timeout,
                             confinement=limits.confinement_of(row))
    if row.provider == "python":
        return PythonConfig(output=output, needs_workspace=needs_workspace,
                            entrypoint=importable(row.entrypoint) if row.entrypoint else "",
                            confinement=limits.confinement_of(row))
    if row.provider == "http":
        return HttpConfig(output=output, needs_workspace=needs_workspace, http=config.get("http"), timeout=timeout)
    return RunConfig(output=output, needs_workspace=needs_workspace)


def pattern_key(toolset_id: str, pattern: str, where: str = "params.toolId") -> str:
    """The key a pattern override is stored under in its toolset: ``server:tool`` or
    ``toolset:tool`` patterns as given, an MCP id pattern (``mcp:toolset~server:read_*``) as its
    ``server:tool`` part, one without ``:`` as a pattern of the toolset's own tools."""
    key = pattern
    if key.startswith("mcp:"):
        ref, _, name = key.removeprefix("mcp:").partition(":")
        owner, tilde, server = ref.partition("~")
        if tilde and owner != toolset_id:
            raise InvalidParams(where, f"{pattern!r} names the toolset {owner!r}, not {toolset_id!r}")
        key = f"{server if tilde else ref}:{name}"
    elif ":" not in key:
        key = f"{toolset_id}:{key}"
    if (wrong := overrides.pattern_problem(key)) is not None:
        raise InvalidParams(where, f"{pattern!r} is not a tool pattern: {wrong}")
    return key


class Catalog:
    """The tool catalog over one database and the live MCP connections."""

    def __init__(self, db: Database, host: McpHost, data_dir: Path | None = None,
                 sandbox: Sandbox | None = None) -> None:
        self.db = db
        self.host = host
        self.data_dir = data_dir  # never a writable path of a tool's sandbox
        self.sandbox = sandbox  # what confines tools here: a tool's limits say what it cannot enforce

    def mechanism(self) -> str | None:
        """What confines tools here, once the probe has found it (it runs at start-up, on a thread:
        a listing never waits for it, nor probes on the event loop)."""
        found = self.sandbox.known() if self.sandbox is not None else None
        return found.mechanism if found is not None else None

    def instructions(self, server_key: str) -> str | None:
        """What a connected MCP server said about using its tools (None: nothing, or not connected)."""
        return self.host.instructions(server_key)

    async def config_values(self) -> dict[str, list[ConfigValue]]:
        """Every config value set, by toolset (secret ones as markers); read once per change."""
        return await self.db.cached(CATALOG, ("config", "values"), self._load_values)

    async def _load_values(self) -> dict[str, list[ConfigValue]]:
        found: dict[str, list[ConfigValue]] = {}
        for v in await ToolConfigRepo(self.db).all():
            found.setdefault(v.toolset_id, []).append(v)
        return found

    async def patterns(self) -> dict[str, list[OverrideRow]]:
        """The overrides stored under a pattern, by toolset; read once per change."""
        repo = ToolCatalogRepo(self.db)
        return await self.db.cached(CATALOG, ("overrides", "patterns"), repo.pattern_overrides)

    async def _layered(self, rows: list[CatalogRow]) -> list[tuple[CatalogRow, list[str]]]:
        patterns = await self.patterns()
        return [layered(r, patterns) for r in rows]

    async def _views(self, rows: list[tuple[CatalogRow, list[str]]]) -> list[Tool]:
        values = await self.config_values()
        mechanism = self.mechanism()
        return [view(r, values.get(r.toolset_id or "", []), applied, mechanism) for r, applied in rows]

    async def toolset_tools(self, toolset_id: str) -> list[Tool]:
        return await self._views(await self._layered(await ToolCatalogRepo(self.db).of_toolset(toolset_id)))

    async def mcp_tools(self) -> list[Tool]:
        """The MCP tools the live connections offer now, overrides applied (switched off ones too)."""
        return await mcp_tools.discovered(self.db, self.host)

    async def attachable(self, toolset_id: str, live: list[Tool]) -> list[Tool]:
        """The toolset's tools a chat gets by attaching it: all but those switched off themselves,
        whether the toolset is on or not (seed 003); its servers' tools are taken from `live`
        (`mcp_tools()`)."""
        rows = await self._layered(await ToolCatalogRepo(self.db).of_toolset(toolset_id))
        tools = await self._views([(r, applied) for r, applied in rows
                                   if _switched_on(r) and unavailable_reason(r) is None])
        return tools + [t for t in live if t.toolset_id == toolset_id and t.enabled]

    async def list_tools(self, include_disabled: bool, live: list[Tool] | None = None) -> list[Tool]:
        """``live``: the MCP tools when the caller has them already (`mcp_tools()`)."""
        tools = await self._views(await self._layered(await ToolCatalogRepo(self.db).all()))
        tools += live if live is not None else await self.mcp_tools()
        return tools if include_disabled else [t for t in tools if t.enabled]

    async def stored_tools(self, tool_ids: list[str]) -> list[Tool]:
        """The built-in, Python and HTTP tools among ``tool_ids``, as tools/list shows them (none of a
        soft-deleted toolset)."""
        return await self._views(await self._layered(await ToolCatalogRepo(self.db).some(tool_ids)))

    async def tool_for(self, ref: str) -> str:
        """The canonical id ``ref`` names: a tool id as it is, or what the "+" palette gives,
        ``+slug`` (each toolset's current version of the slug) or ``+slug@version``. When several
        tools match, the enabled ones decide; still several is InvalidParams naming them all."""
        try:
            wanted = slugs.parse_ref(ref)
        except ValueError as exc:
            raise InvalidParams("params.toolId", str(exc)) from None
        if wanted is None:
            return ref
        found = [await self.get_tool(tool_id) for tool_id, current in
                 await ToolCatalogRepo(self.db).by_slug(wanted.slug, wanted.version)
                 if current or wanted.version is not None]
        found += [t for t in await self.mcp_tools()
                  if t.slug == wanted.slug and wanted.version in (None, t.version)]
        if not found:
            raise NotFound("tool", str(wanted), f"no tool has the slug {wanted.slug!r}"
                           + (f" with version {wanted.version!r}" if wanted.version is not None else ""))
        enabled = [t for t in found if t.enabled]
        if len(found) > 1 and len(enabled) == 1:
            return enabled[0].id
        if len(found) > 1:
            names = ", ".join(f"{t.id} ({'toolset ' + t.toolset_id if t.toolset_id else 'built-in'}, version "
                              f"{t.version}{'' if t.enabled else ', disabled'})" for t in found)
            raise InvalidParams("params.toolId", f"{wanted} names {len(found)} tools: {names}; give the id of the "
                                                 "one to run")
        return found[0].id

    async def get_tool(self, tool_id: str) -> Tool:
        return (await self.resolve(tool_id)).tool

    async def resolve(self, tool_id: str, *, live: bool = True) -> Resolved:
        """``live=False``: an MCP tool as stored, without asking its server (for a past call)."""
        if tool_id.startswith("mcp:"):
            return await mcp_tools.resolve(self.db, self.host if live else None, tool_id)
        # On every call's path; the catalog changes seldom, so it is read once per change.
        return await self.db.cached(CATALOG, tool_id, lambda: self._load(tool_id))

    async def files_dir(self, tool_id: str) -> str | None:
        """The folder of the tool's toolset as stored now, soft-deleted or not (None: no such
        tool, or no files)."""
        stored = await ToolCatalogRepo(self.db).tool(tool_id)
        return None if stored is None else stored.files_dir

    async def _load(self, tool_id: str) -> Resolved:
        stored = await ToolCatalogRepo(self.db).tool(tool_id)
        if stored is None:
            raise NotFound("tool", tool_id)
        if stored.toolset_deleted_at is not None and stored.toolset_id is not None:
            raise NotFound("tool", tool_id, f"{tool_id}: {frozen.deleted_tool_message(stored.toolset_id)}")
        row, applied = layered(stored, await self.patterns())
        values = (await self.config_values()).get(row.toolset_id or "", [])
        plan = plan_of(row, values) if row.provider in ("python", "http") else None
        return Resolved(view(row, values, applied, self.mechanism()), run_config(row), row.files_dir,
                        switched_on=_switched_on(row), settings=plan)

    async def sync_builtins(self) -> None:
        """Make the stored built-in rows match this build (the user's ``enabled`` choice is kept)."""
        wanted = [BuiltinRow(tool_id=b.name, name=b.title, description=b.description, input_schema=b.input_schema,
                             requires_confirmation=b.requires_confirmation,
                             config={"renderer": b.renderer, "renderer_config": b.renderer_config,
                                     "needs_workspace": True, "output": {"max_chars": BUILTIN_MAX_CHARS}},
                             slug=slugs.derive(b.name))
                  for b in BUILTINS.values()]
        repo = ToolCatalogRepo(self.db)
        stored = {b.tool_id: b for b in await repo.builtins()}
        marked = await repo.builtins_gone()
        names = {b.tool_id for b in wanted}
        gone = [k for k in stored if k not in names]
        if ({k: v for k, v in stored.items() if k in names} == {b.tool_id: b for b in wanted}
                and set(gone) == set(marked)):
            return
        # Seed 002: never deleted automatically; the user's choice for it stays should it come back.
        await repo.replace_builtins([k for k in gone if k not in marked], wanted, BUILTIN_GONE)

    async def set_override(self, toolset_id: str, tool_id: str, changes: dict[str, Any]) -> Tool:
        """Upsert the user's override of one tool; ``changes`` holds only the fields to change."""
        if toolset_id == BUILTIN:
            return await self._set_builtin_enabled(tool_id, changes)
        await self._writable(toolset_id)
        repo = ToolCatalogRepo(self.db)
        constraints, sandbox = changes.pop("constraints", msgspec.UNSET), changes.pop("sandbox", msgspec.UNSET)
        if constraints is not msgspec.UNSET or sandbox is not msgspec.UNSET:
            await self._set_tool_limits(toolset_id, tool_id, constraints, sandbox)
            if not changes:
                return await self.get_tool(self._own_id(toolset_id, tool_id))
        if tool_id.startswith("mcp:"):
            canonical = (await self.resolve(tool_id)).tool.id  # the tool must be known to be overridden
            stored = mcp_tools.override_key(toolset_id, canonical)
        else:
            canonical = stored = tool_id if tool_id.startswith(f"{toolset_id}:") else f"{toolset_id}:{tool_id}"
            if not await repo.has_tool(toolset_id, canonical):
                raise NotFound("tool", canonical, f"toolset {toolset_id!r} has no tool {tool_id!r}")
        await repo.set_override(toolset_id, stored, changes)
        return await self.get_tool(canonical)

    async def set_pattern_override(self, toolset_id: str, pattern: str, changes: dict[str, Any]) -> list[Tool]:
        """Upsert an override stored under a pattern (`overrides`); the tools of the toolset it now
        sets something on are returned (none, when it matches no tool known yet)."""
        if toolset_id == BUILTIN:
            raise InvalidParams("params.toolId", "built-in tools take no pattern overrides: name one tool")
        for name in ("constraints", "sandbox"):
            if name in changes:
                raise InvalidParams(f"params.{name}", f"{name} is set for one tool (name it) or for the whole "
                                                      "toolset (toolsets/setLimits), not for a pattern")
        toolset = await self._writable(toolset_id)
        key = pattern_key(toolset.id, pattern)
        await ToolCatalogRepo(self.db).set_override(toolset_id, key, changes)
        tools = await self.toolset_tools(toolset_id) + [t for t in await self.mcp_tools() if t.toolset_id == toolset_id]
        return [t for t in tools if key in t.overrides_applied]

    @staticmethod
    def _own_id(toolset_id: str, tool_id: str) -> str:
        return tool_id if tool_id.startswith(f"{toolset_id}:") else f"{toolset_id}:{tool_id}"

    async def _set_tool_limits(self, toolset_id: str, tool_id: str, constraints: Any, sandbox: Any) -> None:
        """The user's sandbox layer of one Python tool (the toolset is writable: checked by the caller)."""
        canonical = self._own_id(toolset_id, tool_id)
        stored_row = None if tool_id.startswith("mcp:") else await ToolCatalogRepo(self.db).tool(canonical)
        if stored_row is None or stored_row.toolset_id != toolset_id:
            if tool_id.startswith("mcp:"):
                await self.resolve(tool_id)  # NotFound for a tool nobody knows
                raise InvalidParams("params.sandbox", "an MCP tool runs in its server's process: its sandbox is "
                                                      "the server's (mcpServers/update), not the tool's")
            raise NotFound("tool", canonical, f"toolset {toolset_id!r} has no tool {tool_id!r}")
        if stored_row.provider != "python":
            raise InvalidParams("params.sandbox" if sandbox is not msgspec.UNSET else "params.constraints",
                                f"{canonical} is an HTTP tool: it runs in no process of its own, so it has no "
                                "sandbox; its timeout and the hosts it may call are in its http block "
                                "(http.timeout, http.allowedHosts)")
        repo = ToolLimitsRepo(self.db)
        patch = limits.changed(from_stored(await repo.get(toolset_id, canonical)), constraints, sandbox,
                               self.data_dir)
        await repo.set(toolset_id, canonical, stored(patch))

    async def toolset_limits(self, toolset_id: str) -> tuple[Patch | None, Patch | None, list[Tool]]:
        """The manifest's and the user's layer for the whole toolset, and its Python tools."""
        toolset = await ToolsetRepo(self.db).get(toolset_id)
        if toolset is None:
            raise NotFound("toolset", toolset_id)
        manifest = from_stored(await ToolsetRepo(self.db).limits(toolset_id))
        user = from_stored(await ToolLimitsRepo(self.db).get(toolset_id, WHOLE_TOOLSET))
        return manifest, user, [t for t in await self.toolset_tools(toolset_id) if t.limits is not None]

    async def set_toolset_limits(self, toolset_id: str, constraints: Any, sandbox: Any) -> None:
        """The user's sandbox layer for every tool of the toolset (frozen toolsets refuse it)."""
        await self._writable(toolset_id)
        repo = ToolLimitsRepo(self.db)
        patch = limits.changed(from_stored(await repo.get(toolset_id, WHOLE_TOOLSET)), constraints, sandbox,
                               self.data_dir)
        await repo.set(toolset_id, WHOLE_TOOLSET, stored(patch))

    async def _writable(self, toolset_id: str) -> ToolsetRow:
        toolset = await ToolsetRepo(self.db).get(toolset_id)
        if toolset is None:
            raise NotFound("toolset", toolset_id)
        frozen.refuse_changes(toolset_id, toolset.enabled, toolset.soft_deleted_at, "change its tools")
        return toolset

    async def _set_builtin_enabled(self, tool_id: str, changes: dict[str, Any]) -> Tool:
        repo = ToolCatalogRepo(self.db)
        if not await repo.is_builtin(tool_id):
            raise NotFound("tool", tool_id, f"there is no built-in tool {tool_id!r}")
        other = sorted(wire_name(k) for k in changes if k != "enabled")
        if other:
            raise PermissionDenied(
                f"built-in tools are read-only except enabled; {', '.join(other)} cannot be changed for {tool_id!r}")
        if changes.get("enabled") is not None:
            await repo.set_builtin_enabled(tool_id, bool(changes["enabled"]))
        return await self.get_tool(tool_id)
