"""Per-tool configuration (seed 004's Tool Config Service): config/get, set, delete and test over
the fields a toolset and its tools declare, the settings a Python tool's call gets, and keeping
the values through an upgrade.

Non-secret values live in the database (``store/tool_config.py``); a secret field's value lives in
the secret store only, under ``config:<toolset>:<tool or *>:<key>``, and its row merely says it is
set. No secret value is ever in a response, a log line or an error message: ``config/get`` shows
``****``, and messages name keys, never values; the secret store registers every value it reads or
stores with ``secrets.known``, so log lines are scrubbed of it, and the call path masks a tool's
result or error that quotes one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from .. import frozen
from ..api.config import ConfigField
from ..api.tools import ToolStatus
from ..errors import InvalidParams, NotConfigured, NotFound
from ..secrets import MASK
from ..store import Database
from ..store.tool_catalog import ToolCatalogRepo
from ..store.tool_config import TOOLSET_SCOPE, ConfigValue, ToolConfigRepo
from ..store.toolsets import ToolsetRepo, ToolsetRow
from .catalog import Catalog
from .config_schema import ConfigFieldDecl, article, fits
from .settings import Plan, not_configured_message, plan, schema_of, secret_name

log = logging.getLogger("sidecar.tools")

MAX_VALUE_CHARS = 16_384
COMPLETE = "Configuration looks complete"


class SecretValues(Protocol):
    """What the configuration needs of the secret store."""

    async def get(self, name: str) -> str | None: ...
    async def set(self, name: str, value: str) -> None: ...
    async def delete(self, name: str) -> bool: ...
    async def names(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class _Scope:
    toolset: ToolsetRow
    scope: str  # TOOLSET_SCOPE or the tool's id inside the toolset
    tool_id: str | None  # canonical (toolset:tool) for a tool's scope
    fields: dict[str, ConfigFieldDecl]
    toolset_fields: dict[str, ConfigFieldDecl]  # the toolset-level ones (== fields for the toolset scope)


class ToolConfig:
    def __init__(self, db: Database, catalog: Catalog, secrets: SecretValues) -> None:
        self.db = db
        self.repo = ToolConfigRepo(db)
        self.catalog = catalog
        self.secrets = secrets

    # -- the four methods -----------------------------------------------------------------------

    async def get(self, toolset_id: str, tool_id: str | None) -> tuple[list[ConfigField], ToolStatus]:
        sc = await self._scope(toolset_id, tool_id)
        values = {v.key: v for v in await self.repo.of_toolset(toolset_id) if v.scope == sc.scope}
        fields = []
        for key, f in sc.fields.items():
            v = values.get(key)
            shown = None if v is None else MASK if f.secret else v.value
            fields.append(ConfigField(key=key, description=f.description, type=f.type, secret=f.secret,
                                      required=f.required, value=shown, default=f.default, is_set=v is not None))
        return fields, await self._status(sc)

    async def set(self, toolset_id: str, tool_id: str | None, values: dict[str, Any]) -> ToolStatus:
        sc = await self._scope(toolset_id, tool_id)
        self._editable(sc)
        current = {v.key: v for v in await self.repo.of_toolset(toolset_id) if v.scope == sc.scope}
        puts: list[ConfigValue] = []
        secrets: dict[str, str] = {}
        removed: list[str] = []
        for key, value in values.items():
            f = self._field(sc, key, f"params.values.{key}")
            if value is None:
                removed.append(key)
                continue
            if f.secret and value == MASK and key in current:
                continue  # the mask config/get showed, sent back: keep the stored secret
            checked = _checked(f, value, f"params.values.{key}")
            if f.secret:
                secrets[key] = checked
            puts.append(ConfigValue(toolset_id=toolset_id, scope=sc.scope, key=key, secret=f.secret,
                                    value=None if f.secret else checked))
        # The secret store first: a marker row never points at a value that was not stored.
        for key, value in secrets.items():
            await self.secrets.set(secret_name(toolset_id, sc.scope, key), value)
        await self.repo.put(puts)
        await self._remove(sc, [k for k in removed if k in current], current)
        log.info("config of %s set: %s", _where(sc), ", ".join(values) or "nothing")
        return await self._status(sc)

    async def delete(self, toolset_id: str, tool_id: str | None, key: str) -> ToolStatus:
        sc = await self._scope(toolset_id, tool_id)
        self._editable(sc)
        self._field(sc, key, "params.key")
        current = {v.key: v for v in await self.repo.of_toolset(toolset_id) if v.scope == sc.scope}
        if key in current:
            await self._remove(sc, [key], current)
            log.info("config of %s: %s removed", _where(sc), key)
        return await self._status(sc)

    async def test(self, toolset_id: str, tool_id: str | None) -> tuple[bool, str, list[str]]:
        sc = await self._scope(toolset_id, tool_id)
        p = await self._plan(sc)
        gone = [key for key, name in p.secrets.items() if await self.secrets.get(name) is None]
        missing = p.missing + gone
        if not missing:
            return True, COMPLETE, []
        message = self._message(sc, missing)
        if gone:
            message += f" ({', '.join(gone)}: set before, but no longer in the secret store)"
        return False, message, missing

    # -- a call's settings ----------------------------------------------------------------------

    async def settings(self, tool_id: str, p: Plan) -> dict[str, Any]:
        """The settings a call of ``tool_id`` gets: its toolset's fields then its own, defaults
        filled in and secret values read from the store. NotConfigured while a required key (or a
        secret set before and gone from the store since) has no value."""
        if p.missing:
            raise self._not_configured(tool_id, p, p.missing)
        out = dict(p.values)
        gone = []
        for key, name in p.secrets.items():
            value = await self.secrets.get(name)
            if value is None:
                gone.append(key)
            else:
                out[key] = value
        if gone:
            raise self._not_configured(tool_id, p, gone)
        return out

    def check_ready(self, tool_id: str, p: Plan | None) -> None:
        """Fail fast, before a call takes any lock or joins any branch."""
        if p is not None and p.missing:
            raise self._not_configured(tool_id, p, p.missing)

    def _not_configured(self, tool_id: str, p: Plan, missing: list[str]) -> NotConfigured:
        scope = tool_id.partition(":")[2]
        where = {k: None if k in p.toolset_keys else scope for k in missing}
        return NotConfigured(not_configured_message(tool_id, p.toolset_id, missing, where),
                             toolset_id=p.toolset_id, tool_id=tool_id, missing=missing)

    # -- upgrades and uninstalls ----------------------------------------------------------------

    async def reconcile(self, toolset_id: str) -> None:
        """Bring the stored values in line with the toolset's schema after an install, upgrade or
        uninstall: values of keys that left the schema go; a value whose field changed type is
        converted when that loses nothing (``"5"`` to 5, 5 to ``"5"``, 2.0 to 2) and dropped when
        it cannot be; a plain value whose field became secret moves to the secret store; a secret
        whose field is no longer secret is dropped (it never goes into the database)."""
        toolset = await ToolsetRepo(self.db).get(toolset_id)
        if toolset is None:
            await self._forget(toolset_id)
            return
        stored = await self.repo.of_toolset(toolset_id)
        if not stored:
            return
        schemas = await self._schemas(toolset_id)
        drop: list[ConfigValue] = []
        keep: list[ConfigValue] = []
        for v in stored:
            f = schemas.get(v.scope, {}).get(v.key)
            if f is None:
                log.info("config of %s: %s is no longer in its schema; its value was removed", toolset_id, v.key)
                drop.append(v)
            elif v.secret and not f.secret:
                log.warning("config of %s: %s is no longer secret; its secret value was removed (set it again)",
                            toolset_id, v.key)
                drop.append(v)
            elif not v.secret:
                converted = _convert(f, v.value)
                if converted is _NO:
                    log.warning("config of %s: the value of %s is not %s (its new type); it was removed",
                                toolset_id, v.key, article(f.type))
                    drop.append(v)
                elif f.secret:
                    await self.secrets.set(secret_name(toolset_id, v.scope, v.key), str(converted))
                    keep.append(ConfigValue(toolset_id=toolset_id, scope=v.scope, key=v.key, secret=True))
                elif converted != v.value or type(converted) is not type(v.value):
                    keep.append(ConfigValue(toolset_id=toolset_id, scope=v.scope, key=v.key, secret=False,
                                            value=converted))
        if keep:
            await self.repo.put(keep)
        await self.repo.delete(toolset_id, [(v.scope, v.key) for v in drop])
        for v in drop:
            if v.secret:
                await self.secrets.delete(secret_name(toolset_id, v.scope, v.key))

    async def _forget(self, toolset_id: str) -> None:
        """An uninstalled toolset's secrets leave the store (its rows went with the toolset)."""
        prefix = secret_name(toolset_id, "", "").removesuffix("::")
        for name in await self.secrets.names():
            if name.startswith(prefix + ":"):
                await self.secrets.delete(name)

    # -- internals ------------------------------------------------------------------------------

    async def _scope(self, toolset_id: str, tool_id: str | None) -> _Scope:
        toolset = await ToolsetRepo(self.db).get(toolset_id)
        if toolset is None:
            raise NotFound("toolset", toolset_id)
        frozen.refuse_if_deleted(toolset_id, toolset.soft_deleted_at, "see or change its configuration")
        toolset_fields = schema_of(await ToolsetRepo(self.db).config_schema(toolset_id))
        if tool_id is None:
            return _Scope(toolset, TOOLSET_SCOPE, None, toolset_fields, toolset_fields)
        canonical = tool_id if tool_id.startswith(f"{toolset_id}:") else f"{toolset_id}:{tool_id}"
        row = await ToolCatalogRepo(self.db).tool(canonical)
        if row is None or row.toolset_id != toolset_id:
            raise NotFound("tool", canonical, f"toolset {toolset_id!r} has no tool {tool_id!r} "
                                              "(its Python tools have config fields; MCP tools have none)")
        return _Scope(toolset, canonical.partition(":")[2], canonical, schema_of(row.config.get("config_schema")),
                      toolset_fields)

    async def _schemas(self, toolset_id: str) -> dict[str, dict[str, ConfigFieldDecl]]:
        """Every scope's fields: the toolset's under TOOLSET_SCOPE, each tool's under its id."""
        out = {TOOLSET_SCOPE: schema_of(await ToolsetRepo(self.db).config_schema(toolset_id))}
        for t in await ToolsetRepo(self.db).tools(toolset_id, include_unavailable=True):
            out[t.tool_id.partition(":")[2]] = schema_of(t.config.get("config_schema"))
        return out

    def _editable(self, sc: _Scope) -> None:
        # Seed 002, as tools/setOverride: a disabled toolset is frozen until it is enabled again.
        frozen.refuse_changes(sc.toolset.id, sc.toolset.enabled, sc.toolset.soft_deleted_at,
                              "change its configuration")

    def _field(self, sc: _Scope, key: str, path: str) -> ConfigFieldDecl:
        f = sc.fields.get(key)
        if f is not None:
            return f
        known = ", ".join(sc.fields) or "none"
        where = "this tool" if sc.tool_id else f"toolset {sc.toolset.id!r}"
        hint = ""
        if sc.tool_id and key in sc.toolset_fields:
            hint = "; it is a toolset-level field: set it without toolId"
        elif not sc.tool_id:
            hint = "; a tool's own fields are set with its toolId"
        raise InvalidParams(path, f"{key!r} is not a config field of {where} (its fields: {known}){hint}")

    async def _remove(self, sc: _Scope, keys: list[str], current: dict[str, ConfigValue]) -> None:
        await self.repo.delete(sc.toolset.id, [(sc.scope, k) for k in keys])
        for key in keys:
            if current[key].secret:
                await self.secrets.delete(secret_name(sc.toolset.id, sc.scope, key))

    async def _plan(self, sc: _Scope) -> Plan:
        if sc.tool_id is not None:
            found = (await self.catalog.resolve(sc.tool_id)).settings
            assert found is not None  # (a scope's tool is a Python tool)
            return found
        return plan(sc.toolset.id, None, sc.toolset_fields, {}, await self.repo.of_toolset(sc.toolset.id))

    async def _status(self, sc: _Scope) -> ToolStatus:
        if sc.tool_id is not None:
            status = (await self.catalog.get_tool(sc.tool_id)).status
            assert status is not None  # (the catalog sets it on every tool)
            return status
        if not sc.toolset.enabled:
            return "unavailable"
        return "available" if (await self._plan(sc)).missing else "connected"

    def _message(self, sc: _Scope, missing: list[str]) -> str:
        where = {k: None if k in sc.toolset_fields else sc.scope for k in missing}
        return not_configured_message(sc.tool_id or f"toolset {sc.toolset.id}", sc.toolset.id, missing, where)


def _where(sc: _Scope) -> str:
    return sc.tool_id or f"toolset {sc.toolset.id}"


def _checked(f: ConfigFieldDecl, value: Any, path: str) -> Any:
    """``value`` as stored, or InvalidParams saying what the field takes (never echoing the value:
    it may be a secret)."""
    if not fits(f.type, value):
        raise InvalidParams(path, f"expected {article(f.type)}, got {_json_type(value)}")
    if isinstance(value, str):
        if f.secret:
            value = value.strip()  # a key pasted with its newline would break the header it goes into
            if not value:
                raise InvalidParams(path, "an empty secret; use config/delete to remove the value")
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidParams(path, f"{len(value)} characters; the limit is {MAX_VALUE_CHARS}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


_NO = object()


def _convert(f: ConfigFieldDecl, value: Any) -> Any:
    """``value`` as the field's type when that loses nothing, else ``_NO``."""
    if fits(f.type, value):
        return value
    if f.type == "string" and isinstance(value, (bool, int, float)):
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    if f.type == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if f.type == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        try:
            if f.type == "integer":
                return int(text)
            if f.type == "number":
                return float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            return _NO
    return _NO
