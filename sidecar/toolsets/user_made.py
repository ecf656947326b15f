"""Toolsets the user makes in the UI (issue 14, seed 002's bundles): created empty, renamed, and
filled with HTTP tools put under a ``<slug, version>`` each.

Only such a toolset (source_type 'user', not an MCP server's) takes these writes: an imported one
says what it holds in its toolset.yaml (an upgrade would silently drop a tool put into it), and
built-in tools are read-only (seed 002). A put tool's id is ``<toolset>:<slugs.local_id>``, made
of its pair alone, so it never moves while the tool exists. It exports as any toolset does; the
import of that export is then a bundle like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from .. import frozen
from ..api.base import is_id, wire_name
from ..errors import Conflict, InvalidParams, ManifestError, NotFound, PermissionDenied
from ..store import Database
from ..store.rows import now
from ..store.toolsets import Install, ToolsetRow
from ..store.user_toolsets import UserToolsetRepo
from ..tools import slugs
from ..tools.catalog import BUILTIN
from .manifest import from_data
from .service import stored_tool

if TYPE_CHECKING:
    from ..api.authoring import ToolDefinition
    from .service import ToolsetService



def checked_pair(slug: str, version: str) -> tuple[str, str]:
    """The pair as stored (NFC), or InvalidParams naming the field and the rule."""
    slug, problem = slugs.check_slug(slug)
    if problem:
        raise InvalidParams("params.slug", f"{slug!r} {problem}; a slug is {slugs.SLUG_RULE}")
    version, problem = slugs.check_version(version)
    if problem:
        raise InvalidParams("params.version", f"{version!r} {problem}; a version is {slugs.VERSION_RULE}")
    return slug, version


class UserToolsets:
    def __init__(self, db: Database, toolsets: ToolsetService) -> None:
        self.repo = UserToolsetRepo(db)
        self.toolsets = toolsets  # installs share its lock; its on_change follows every write here

    async def create(self, toolset_id: str, name: str, description: str, enabled: bool) -> ToolsetRow:
        if not is_id(toolset_id):
            raise InvalidParams("params.id", "1-64 letters, digits, '.', '_' and '-', starting with a letter or "
                                             "digit (no '/', '~', ':' or spaces)")
        if toolset_id == BUILTIN:
            raise InvalidParams("params.id", "'builtin' names the tools that ship with the sidecar; choose another id")
        if not name.strip():
            raise InvalidParams("params.name", "give the toolset a name to show")
        async with self.toolsets.lock:
            existing = await self.toolsets.repo.get(toolset_id)
            if existing is not None:
                what = "an MCP server you added" if existing.user_mcp else "a toolset"
                if existing.soft_deleted_at is not None:  # hidden from lists, but its id is still taken
                    what = "a deleted toolset (toolsets/restore or toolsets/uninstall it)"
                raise Conflict("already exists", f"{what} has the id {toolset_id!r} already; choose another id")
            stamp = now()
            await self.toolsets.repo.write_install(Install(
                toolset=ToolsetRow(id=toolset_id, name=name.strip(), version="0.0.0", description=description,
                                   enabled=enabled, user_mcp=False, source_type="user", source_ref=None,
                                   installed_at=stamp, files_dir=None),
                manifest_version="1", updated_at=stamp, files=[], tools=[], overrides=[], servers=[]),
                replace=False)
        await self.toolsets.changed(toolset_id)
        return await self.toolsets.get(toolset_id)

    async def update(self, toolset_id: str, name: str | None, description: str | None) -> ToolsetRow:
        toolset = await self._own(toolset_id)
        frozen.refuse_if_deleted(toolset_id, toolset.soft_deleted_at, "rename it")
        if name is not None and not name.strip():
            raise InvalidParams("params.name", "give the toolset a name to show (or leave name out)")
        await self.repo.update(toolset_id, name.strip() if name is not None else None, description, now())
        await self.toolsets.changed(toolset_id)
        return await self.toolsets.get(toolset_id)

    async def put(self, toolset_id: str, slug: str, version: str, definition: ToolDefinition) -> str:
        """Store the HTTP tool; its canonical id."""
        slug, version = checked_pair(slug, version)
        toolset = await self._writable(toolset_id)
        decl = {"id": slugs.local_id(slug, version), "slug": slug, "version": version, "http": definition.http,
                "name": slug,  # shown while the definition names none (not the id, which has the version)
                **{k: v for k, v in msgspec.structs.asdict(definition).items()
                   if k != "http" and v not in (None, {}, [], False)}}
        try:
            parsed = from_data({"manifest_version": "1", "id": toolset.id, "name": toolset.name, "tools": [decl]})
        except ManifestError as exc:
            raise InvalidParams(_wire_path(exc.path), exc.reason) from None
        tool = stored_tool(toolset.id, parsed.manifest.tools[0], {})
        if not await self.repo.put_tool(toolset.id, tool, now()):
            raise Conflict("already exists", f"the toolset {toolset.id!r} has {slug!r} version {version!r} already "
                                             "(left as it is); put this one under a new version, or tools/delete "
                                             "that one first")
        await self.toolsets.changed(toolset.id)
        return tool.tool_id

    async def delete(self, toolset_id: str, slug: str, version: str) -> None:
        slug, version = checked_pair(slug, version)
        await self._writable(toolset_id)
        if await self.repo.delete_tool(toolset_id, slug, version, now()) is None:
            raise NotFound("tool", f"+{slug}@{version}", f"the toolset {toolset_id!r} has no {slug!r} version "
                                                         f"{version!r}")
        await self.toolsets.changed(toolset_id)

    async def set_current(self, toolset_id: str, slug: str, version: str) -> str:
        slug, version = checked_pair(slug, version)
        await self._writable(toolset_id)
        tool_id = await self.repo.set_current(toolset_id, slug, version, now())
        if tool_id is None:
            raise NotFound("tool", f"+{slug}@{version}", f"the toolset {toolset_id!r} has no {slug!r} version "
                                                         f"{version!r}")
        await self.toolsets.changed(toolset_id)
        return tool_id

    async def _own(self, toolset_id: str) -> ToolsetRow:
        """The toolset, if it is one the user made; else why it cannot be changed here."""
        if toolset_id == BUILTIN:
            raise PermissionDenied("built-in tools are read-only (only switching one on or off is allowed)")
        toolset = await self.toolsets.get(toolset_id)
        if toolset.user_mcp:
            raise PermissionDenied(f"{toolset_id!r} is an MCP server you added; change it with mcpServers/update")
        if toolset.source_type != "user":
            raise PermissionDenied(
                f"the toolset {toolset_id!r} was imported ({toolset.source_type}): its toolset.yaml says what it "
                "holds, and an upgrade would drop what is put here; change the bundle and import it with replace, "
                "or make a toolset of your own with toolsets/create")
        return toolset

    async def _writable(self, toolset_id: str) -> ToolsetRow:
        await self._own(toolset_id)
        return await self.toolsets.writable(toolset_id, "change its tools")


def _wire_path(manifest_path: str) -> str:
    """``tools[0].http.urlTemplate`` -> ``params.definition.http.urlTemplate``: where tools/put's params
    hold the field a one-tool manifest named."""
    place = manifest_path.removeprefix("tools[0]").lstrip(".")
    if not place:
        return "params.definition"
    head, sep, rest = place.partition(".")
    name, bracket, index = head.partition("[")
    if name in ("slug", "version"):
        return f"params.{name}"
    return "params.definition." + wire_name(name) + (bracket + index) + (sep + rest)

