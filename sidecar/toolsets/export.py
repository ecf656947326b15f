"""A toolset exported: toolset.yaml regenerated from the database (secrets as ``${NAME}``
placeholders, the values the user set left on this machine) packed with its stored files."""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import msgspec

from .. import secrets
from ..errors import InvalidParams, StorageError
from ..sandbox import settings as sandbox_settings
from ..sandbox.policy import Patch
from ..secrets.store import is_user_name
from ..store.mcp_servers import McpServerRepo, McpServerRow
from ..store.toolsets import StoredTool, ToolsetRepo, ToolsetRow
from ..tools import slugs
from .bundle import MANIFEST
from .manifest import yaml_entry

if TYPE_CHECKING:
    from ..secrets.store import SecretStore

log = logging.getLogger("sidecar.toolsets")


async def write(repo: ToolsetRepo, servers_of: McpServerRepo, vault: SecretStore, toolset: ToolsetRow,
                dest: str) -> tuple[Path, int, str, list[str]]:
    """The toolset as a ZIP at ``dest`` (replaced whole): its path, size, sha256 and the
    ``${NAME}``s its servers need."""
    target = Path(dest)
    if not target.is_absolute() or target.suffix.lower() != ".zip":
        raise InvalidParams("params.path", "give an absolute path ending in .zip")
    if not target.parent.is_dir():
        raise InvalidParams("params.path", f"the folder {target.parent} does not exist")
    manifest = await manifest_from_rows(repo, servers_of, toolset, await stored_values(vault))
    files = await repo.files(toolset.id)
    data = await anyio.to_thread.run_sync(_pack, manifest, [(f.path, f.stored_path) for f in files], target)
    return target, len(data), hashlib.sha256(data).hexdigest(), variables(manifest)


async def stored_values(vault: SecretStore) -> dict[str, str]:
    """The user's secrets as value -> name (those the store can give now: a locked keystore
    leaves the values read this session)."""
    names = [n for n in await vault.names() if is_user_name(n)]
    try:
        await vault.environ(names)
    except StorageError as exc:
        log.warning("export: the secret store cannot be read (%s); values read earlier still count", exc)
    return {v: n for n in names if (v := vault.cached(n))}

async def manifest_from_rows(repo: ToolsetRepo, servers_of: McpServerRepo, toolset: ToolsetRow,
                             stored: dict[str, str] | None = None) -> dict[str, Any]:
    """toolset.yaml regenerated from the database, secrets turned into ${VAR} placeholders: a
    value of the secret store (`stored`: value -> name) as the name it has there, any other by
    its meaning (`secrets.masking`), each distinct secret under a name of its own."""
    tid = toolset.id
    tools = await repo.tools(tid)
    overrides = await repo.overrides(tid)
    servers = [_from_store(r, stored or {}) for r in await servers_of.of_toolset(tid)]
    # One per export: two different secrets never share a name, nor take one the manifest uses.
    names = secrets.Placeholders(secrets.references(" ".join(
        [*(a for r in servers for a in r.args), *(r.url or "" for r in servers),
         *(v for r in servers for v in (*r.headers.values(), *r.env.values()))])))
    out: dict[str, Any] = {"manifest_version": "1", "id": tid, "name": toolset.name,
                           "version": toolset.version, "description": toolset.description}
    # The schema only: the values the user set stay on this machine (seed 004).
    schema = await repo.config_schema(tid)
    if schema:
        out["config_schema"] = schema
    out.update(sandbox_settings.to_blocks(sandbox_settings.from_stored(await repo.limits(tid)) or Patch()))
    # The current version of each slug last: importing the export makes the same one current.
    out["tools"] = [exported_tool(t) for t in sorted(tools, key=lambda t: t.current)]
    out["tool_overrides"] = [drop_empty({
        "tool_id": o.tool_id.removeprefix(f"{tid}:"), "renderer": o.renderer,
        "renderer_config": o.renderer_config, "name_override": o.name_override,
        "description_override": o.description_override, "requires_confirmation": o.requires_confirmation,
        "enabled": o.enabled}) for o in overrides]
    out["mcp_servers"] = [_server(r, names) for r in servers]
    return {k: v for k, v in out.items() if v != []}


def _server(r: McpServerRow, names: secrets.Placeholders) -> dict[str, Any]:
    """A stored server as toolset.yaml declares it; its sandbox as ``sandbox: {...}`` even when that
    is ``{}`` (the defaults: confined, unlike no sandbox at all)."""
    declared = msgspec.structs.replace(
        r.as_declaration(), args=secrets.placeholder_args(r.args, names),
        url=secrets.placeholder_url(r.url, names) if r.url else None,
        headers=secrets.placeholder_map(r.headers, names), env=secrets.placeholder_map(r.env, names),
        sandbox=r.sandbox if r.type == "stdio" else None)
    return yaml_entry(declared) | ({"tool_output": r.tool_output} if r.tool_output else {})


def _from_store(row: McpServerRow, stored: dict[str, str]) -> McpServerRow:
    """A server with the secret store's values in its config written as their ``${NAME}``."""
    if not stored:
        return row
    ref = functools.partial(secrets.stored_as_references, stored=stored)
    return msgspec.structs.replace(
        row, args=[ref(a) for a in row.args], url=ref(row.url) if row.url else row.url,
        env={k: ref(v) for k, v in row.env.items()}, headers={k: ref(v) for k, v in row.headers.items()})


def variables(manifest: dict[str, Any]) -> list[str]:
    """The ${NAME}s an exported manifest's servers refer to, in order of first use."""
    texts = [t for s in manifest.get("mcp_servers", []) for t in (
        *s.get("args", []), s.get("url") or "", *s.get("env", {}).values(), *s.get("headers", {}).values())]
    return list(dict.fromkeys(n for t in texts for n in secrets.references(t)))


def exported_tool(t: StoredTool) -> dict[str, Any]:
    """A stored tool as toolset.yaml declares it (slug and version only where they differ from
    what the id would give)."""
    local = t.tool_id.partition(":")[2]
    limits = sandbox_settings.to_blocks(sandbox_settings.from_stored(t.config.get("limits")) or Patch())
    return drop_empty({
        "id": local, "slug": t.slug if t.slug != slugs.derive(local) else None,
        "version": t.version if t.version != slugs.DEFAULT_VERSION else None, "tags": t.tags,
        "name": t.name, "description": t.description,
        "entrypoint": t.entrypoint, "input_schema": t.input_schema,
        "requires_confirmation": t.requires_confirmation or None,
        # The older name only where constraints does not say it already.
        "timeout": None if "constraints" in limits else t.config.get("timeout"), **limits,
        "output": t.config.get("output"),
        "config_schema": t.config.get("config_schema"), "http": t.config.get("http"),
        "trigger": t.config.get("trigger")})

def drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in (None, {}, [], "")}


def _pack(manifest: dict[str, Any], files: list[tuple[str, str]], target: Path) -> bytes:
    import yaml  # loaded on first use, as manifest.py does

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
