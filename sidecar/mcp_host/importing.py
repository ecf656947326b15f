"""mcpServers/importPreview and mcpServers/import: other apps' servers (`app_configs`) offered, then
added as mcpServers/add adds them.

Imports run one at a time: each decides which ids are free and then adds, so two imports of one file
at once add each server once (the second finds the first's servers and skips them as installed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from .. import secrets
from ..api.mcp import FoundServer, McpImportParams, McpServer, SecretInput, ServerDecl, SkippedServer
from ..errors import Conflict, InvalidParams, NotFound, StorageError
from . import app_configs, edits
from .runners import recognise

if TYPE_CHECKING:
    from .servers import McpServers


class Importer:
    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        self._one_at_a_time = anyio.Lock()

    async def preview(self, path: str | None, project: str | None
                      ) -> tuple[list[FoundServer], list[SkippedServer], list[str]]:
        """The servers the apps configure (at `path`, or where they keep them, and in `project`)."""
        found, skipped, warnings = await self._discover(path, project)
        taken = {t.id for t in await self.servers.toolsets.all()}
        used = {f.id: edits.references(f) for f in found}
        try:
            have: Mapping[str, str] = await self.servers.vault.environ(set().union(*used.values()))
        except StorageError:  # a locked keystore: only the environment can say
            have = os.environ
        others = taken | set(used)  # a suggested id is free of the other servers found too, as import's rename
        out = [_found_out(f, taken, others, sorted(n for n in used[f.id] if n not in have)) for f in found]
        return out, [SkippedServer(s.id, s.reason, s.path) for s in skipped], warnings

    async def import_(self, p: McpImportParams) -> tuple[list[McpServer], list[SkippedServer], dict[str, str]]:
        """Add the picked servers, each under its id or the one `p.rename` gives it. A taken id is
        renamed, skipped, or (onConflict fail) refuses the whole import before anything is added."""
        async with self._one_at_a_time:
            return await self._import(p)

    async def _import(self, p: McpImportParams) -> tuple[list[McpServer], list[SkippedServer], dict[str, str]]:
        found, _, _ = await self._discover(p.path, p.project)
        by_id = {f.id: f for f in found}
        _check_picks(p, by_id)
        taken = {t.id for t in await self.servers.toolsets.all()}
        picked: list[tuple[app_configs.Found, str]] = []
        skipped: list[SkippedServer] = []
        renamed: dict[str, str] = {}
        colliding: list[str] = []
        new_ids: dict[str, str] = {}
        for wanted in dict.fromkeys(p.ids):
            new_id = p.rename.get(wanted, wanted)
            if new_id in new_ids:
                raise InvalidParams(f"params.rename.{wanted}",
                                    f"{new_id!r} is also the id given to {new_ids[new_id]!r}; give each its own")
            if new_id not in taken:
                new_ids[new_id] = wanted
                picked.append((by_id[wanted], new_id))
            elif wanted in p.rename:
                raise Conflict("already installed", f"params.rename.{wanted}: a server or toolset {new_id!r} "
                                                    f"exists already; choose another id")
            elif p.on_conflict == "fail":
                colliding.append(wanted)
            elif p.on_conflict == "skip":
                skipped.append(SkippedServer(wanted, f"a server or toolset {wanted!r} exists already; import it "
                                                     f"again with rename {{{wanted!r}: {_free_id(wanted, taken)!r}}}"))
            elif await self._installed_already(by_id[wanted]):
                skipped.append(SkippedServer(wanted, f"installed already: the server {wanted!r} runs the same "
                                                     f"{'command' if by_id[wanted].command else 'URL'}"))
            else:
                new_id = _free_id(wanted, taken | set(new_ids) | set(by_id))
                new_ids[new_id] = wanted
                renamed[wanted] = new_id
                picked.append((by_id[wanted], new_id))
        if colliding:
            raise Conflict("already installed", (
                f"servers or toolsets with these ids exist already: {', '.join(colliding)}; rename them "
                "(params.rename), leave them out of ids, or set onConflict to rename or skip. Nothing was imported"))
        added: list[McpServer] = []
        for f, new_id in picked:
            try:
                toolset = await self.servers._add_user_server(ServerDecl(  # noqa: SLF001 - the service's own helper
                    id=new_id, type=f.type, command=f.command, args=f.args, env=f.env, cwd=f.cwd, url=f.url,
                    headers=f.headers, install_timeout=p.install_timeout if recognise(f.command, f.args) else None))
            except Conflict:  # mcpServers/add took the id meanwhile: the others still go in
                skipped.append(SkippedServer(f.id, f"a server or toolset {new_id!r} was added meanwhile; "
                                                   "preview again to import it under another id"))
                renamed.pop(f.id, None)
                continue
            key = f"{toolset.id}~{toolset.id}"
            added.append(await (self.servers.set_enabled(key, False) if not f.enabled
                                 else self.servers.checked_view(key)))
        return added, skipped, renamed

    async def _installed_already(self, f: app_configs.Found) -> bool:
        """The installed server of `f`'s id runs what `f` runs, with the same environment and headers
        (the secrets it stored compared as resolved: an import moved `f`'s literals there)."""
        try:
            row = await self.servers.find(f.id)
        except NotFound:
            return False
        if (row.type, row.command, row.cwd, sorted(row.env), sorted(row.headers)) != (
                f.type, f.command, f.cwd, sorted(f.env), sorted(f.headers)):
            return False
        mine = [*f.args, f.url or "", *(f.env[k] for k in sorted(f.env)), *(f.headers[k] for k in sorted(f.headers))]
        theirs = [*row.args, row.url or "", *(row.env[k] for k in sorted(row.env)),
                  *(row.headers[k] for k in sorted(row.headers))]
        if len(mine) != len(theirs):
            return False
        try:
            env = await self.servers.vault.environ(secrets.references_in(theirs))
        except StorageError:
            env = {}
        for a, b in zip(mine, theirs, strict=True):
            if a == b:
                continue
            try:
                if secrets.resolve(b, env) != a:
                    return False
            except secrets.MissingVariable:
                return False
        return True

    async def _discover(self, path: str | None, project: str | None
                        ) -> tuple[list[app_configs.Found], list[app_configs.Skipped], list[str]]:
        for field, given in (("path", path), ("project", project)):
            if given is not None and not Path(given).is_absolute():
                raise InvalidParams(f"params.{field}", "give an absolute path")
        if project is not None and not await anyio.Path(project).is_dir():
            raise InvalidParams("params.project", f"{project} is not a folder")
        try:
            stored = set(await self.servers.vault.names())
        except StorageError:
            stored = set()
        env = os.environ

        def known(name: str) -> bool:
            return name in stored or name in env

        try:
            return await anyio.to_thread.run_sync(
                lambda: app_configs.discover(Path(path) if path else None, Path(project) if project else None, known))
        except FileNotFoundError:
            raise NotFound("file", str(path)) from None
        except app_configs.ConfigError as exc:
            raise InvalidParams("params.path", str(exc)) from None


def _check_picks(p: McpImportParams, by_id: Mapping[str, app_configs.Found]) -> None:
    for i, wanted in enumerate(p.ids):
        if wanted not in by_id:
            raise InvalidParams(f"params.ids[{i}]", f"no server {wanted!r} was found; run mcpServers/importPreview")
    for old in p.rename:
        if old not in p.ids:
            raise InvalidParams(f"params.rename.{old}", f"{old!r} is not among the ids to import")


def _found_out(f: app_configs.Found, taken: set[str], others: set[str], unset: list[str]) -> FoundServer:
    exists = f.id in taken
    return FoundServer(id=f.id, source=f.source, path=f.path, type=f.type,
                       command=secrets.masked_command(f.command, f.args),
                       url=secrets.mask_url(f.url) if f.url else None, env_keys=sorted(f.env),
                       enabled=f.enabled, project=f.project,
                       exists=exists, suggested_id=_free_id(f.id, others) if exists else None,
                       unset_variables=unset,
                       inputs=[SecretInput(i.name, i.prompt_id, i.description, i.password) for i in f.inputs],
                       warnings=f.warnings)


def _free_id(server_id: str, taken: set[str]) -> str:
    """``github`` -> ``github-2`` (or the next free number), kept a valid id."""
    n = 2
    while (candidate := f"{server_id[:60]}-{n}") in taken:
        n += 1
    return candidate
