"""The MCP-server service: the stored side (`store/mcp_servers.py`) and the live side (`McpHost`) as one.

It adds, edits (`edits.py`), removes, enables and reconnects servers, keeps the host running what
the database says (`sync`, after any change to the catalog), joins a row with its live state into the `McpServer`
the UI sees, and reports status changes through `on_status`. The host is its own: other services
reach the connections through `McpServers.host`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread
import msgspec
from anyio.abc import TaskGroup

from .. import frozen, secrets
from ..api.limits import LimitWarning
from ..api.mcp import (
    AddParams,
    FoundServer,
    ListServersParams,
    McpImportParams,
    McpServer,
    OAuthClient,
    ServerDecl,
    SkippedServer,
    UpdateParams,
)
from ..errors import Conflict, NotFound, StorageError
from ..paging import Pages
from ..sandbox.bwrap import SYSTEM
from ..sandbox.hints import warnings_of
from ..sandbox.runner import Sandbox, python_paths
from ..secrets import inherited
from ..store import Database
from ..store.mcp_servers import AmbiguousServer, McpServerRepo, McpServerRow
from ..store.mcp_tools_seen import McpToolsSeenRepo
from . import edits, server_files, signin
from .commands import CommandNotFound, resolve_command
from .config import ServerConfig, sandbox_of
from .connect import config_references
from .elicitation import Elicit
from .host import DEFAULT_MAX_RESULT_BYTES, McpHost
from .importing import Importer
from .logs import OnLog
from .signin import check_client
from .state import ServerState

if TYPE_CHECKING:
    from ..secrets.store import SecretStore
    from ..store.toolsets import ToolsetRow

log = logging.getLogger(__name__)

OnServerStatus = Callable[[McpServer], Awaitable[None]]


class Toolsets(Protocol):
    """What the MCP servers ask of the toolsets (``toolsets/service.py``, which sits above this room;
    compose passes it in): a user's server is a toolset of its own, added and removed with it."""

    async def get(self, toolset_id: str) -> ToolsetRow: ...
    async def all(self) -> list[ToolsetRow]: ...
    async def add_user_server(self, server: ServerDecl) -> ToolsetRow: ...
    def checked_user_server(self, server: ServerDecl) -> ServerDecl: ...
    async def uninstall(self, toolset_id: str) -> bool: ...


def config_of(row: McpServerRow) -> ServerConfig:
    """What the host needs to run a stored server."""
    timeouts = {k: float(v) for k, v in (("connect_timeout", row.connect_timeout),
                                         ("call_timeout", row.call_timeout),
                                         ("install_timeout", row.install_timeout)) if v}
    return ServerConfig(server_id=row.id, toolset_id=row.toolset_id, type=row.type,
                        command=row.command, args=tuple(row.args), env=row.env, cwd=row.cwd, url=row.url,
                        env_passthrough=tuple(row.env_passthrough),
                        headers=row.headers, enabled=row.should_run, log_level=row.log_level,
                        sandbox=sandbox_of(row.sandbox) if row.type == "stdio" else None, **timeouts)


async def find(repo: McpServerRepo, ref: str) -> McpServerRow:
    """A server by key or unambiguous bare id; `NotFound` / `Conflict` otherwise."""
    try:
        row = await repo.find(ref)
    except AmbiguousServer as exc:
        raise Conflict("ambiguous server id", str(exc)) from None
    if row is None:
        raise NotFound("mcpServer", ref)
    return row


class McpServers:
    def __init__(self, db: Database, toolsets: Toolsets, vault: SecretStore, *,
                 on_status: OnServerStatus | None = None, elicit: Elicit | None = None,
                 open_url: signin.OpenUrl | None = None, client_metadata_url: str | None = None,
                 max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES, on_log: OnLog | None = None,
                 sandbox: Sandbox | None = None, installs: Path | None = None) -> None:
        self.repo = McpServerRepo(db)
        self.toolsets = toolsets
        self.vault = vault
        self._on_status = on_status
        # One add, import or edit at a time: each picks secret names against what the store holds,
        # and a refused one deletes the names it stored, which a concurrent one must not share.
        self._editing = anyio.Lock()
        self._sandbox = sandbox = sandbox or Sandbox()
        # One mcpServers/status per change: a re-listing of tools comes through on_status too.
        self.importer = Importer(self)
        self.host = McpHost(on_status=self._host_status, elicit=elicit, max_result_bytes=max_result_bytes,
                            variables=vault.environ, on_log=on_log, vault=vault, open_url=open_url,
                            client_metadata_url=client_metadata_url, sandbox=sandbox, installs=installs)

    # -- lifecycle -------------------------------------------------------------------------------------

    def bind(self, tg: TaskGroup) -> None:
        """Give the host the task group its connections live in (the sidecar's)."""
        self.host.bind(tg)

    async def sync(self, _changed: str | None = None) -> None:
        """Hand the host the servers the database says should exist (after any change to them)."""
        await self.host.sync([config_of(r) for r in await self.repo.all()])

    async def aclose(self) -> None:
        await self.host.aclose()

    async def variable_changed(self, name: str) -> None:
        """A secret was set or deleted: servers waiting on it connect now."""
        await self.host.variable_changed(name)

    async def references(self) -> dict[str, list[str]]:
        """Variable name -> the servers (``mcpServer:<key>``) whose stored config refers to it."""
        found: dict[str, list[str]] = {}
        for row in await self.repo.all(include_deleted=True):  # a deleted toolset's server needs them once restored
            for name in config_references(config_of(row)):
                found.setdefault(name, []).append(f"mcpServer:{row.key}")
        return found

    # -- reading ---------------------------------------------------------------------------------------

    async def find(self, ref: str) -> McpServerRow:
        """A server of a live toolset (Conflict for one whose toolset is soft-deleted: restore it first)."""
        row = await find(self.repo, ref)
        frozen.refuse_if_deleted(row.toolset_id, row.toolset_deleted_at, f"use its server {row.key}")
        return row

    async def all(self) -> list[McpServer]:
        return [self.view(r) for r in await self.repo.all()]

    async def page(self, p: ListServersParams) -> tuple[list[McpServer], str | None]:
        """mcpServers/list: a keyset page in the order ``all`` gives."""
        pages = Pages("mcpServers/list", {}, tuple[str, int])
        rows = await self.repo.page(p.page_size + 1, pages.after(p.page_token))
        page, token = pages.page(rows, p.page_size, lambda r: (r[1].toolset_id, r[0]))
        return [self.view(r) for _, r in page], token

    async def get(self, ref: str) -> McpServer:
        return self.view(await self.find(ref))

    async def limit_warnings(self, toolset_id: str) -> list[LimitWarning]:
        """What the sandboxes of a toolset's stdio servers allow beyond seed 004's defaults."""
        return [w for r in await self.repo.of_toolset(toolset_id) if r.type == "stdio"
                and (c := sandbox_of(r.sandbox)) is not None for w in warnings_of(c, server=r.server_id)]

    def view(self, row: McpServerRow) -> McpServer:
        """The row joined with its live state, secrets masked."""
        try:
            state = self.host.state(row.key)
            status, error, tools, name = state.status, state.error, state.tool_count, state.server_name
            confined_by, runner, install = state.confined_by, state.runner, state.install
        except KeyError:  # not handed to the host yet (added a moment ago)
            status, error, tools, name = ("connecting" if row.should_run else "disabled"), None, 0, None
            confined_by = runner = install = None
        return McpServer(
            id=row.key, server_id=row.server_id, toolset_id=row.toolset_id, type=row.type,
            status=status, enabled=row.should_run, tool_count=tools, error=error, user_mcp=row.user_mcp,
            command=secrets.masked_command(row.command, row.args),
            url=secrets.mask_url(row.url) if row.url else None, server_name=name,
            requires_confirmation=row.requires_confirmation, env=secrets.mask_map(row.env),
            headers=secrets.mask_map(row.headers), cwd=row.cwd,
            connect_timeout=row.connect_timeout, call_timeout=row.call_timeout, log_level=row.log_level,
            sandbox=row.sandbox if row.type == "stdio" else None, confined_by=confined_by,
            install_timeout=row.install_timeout, runner=runner, install=install,
            env_passthrough=list(row.env_passthrough), env_names=_env_names(row),
        )

    async def checked_view(self, key: str) -> McpServer:
        """``view`` with the warnings of a server just added or changed: what will stop it from starting."""
        row = await self.find(key)
        found = await _start_warnings(row, self._sandbox)
        return msgspec.structs.replace(self.view(row), warnings=found)

    # -- changing --------------------------------------------------------------------------------------

    async def add(self, p: AddParams) -> McpServer:
        """A standalone server: a userMcp toolset whose id is the server's (the toolset's change syncs it)."""
        toolset = await self._add_user_server(p)
        return await self.checked_view(f"{toolset.id}~{toolset.id}")

    async def update(self, p: UpdateParams) -> McpServer:
        """Change a server in place; the host restarts it only when its `ServerConfig` changed."""
        async with self._editing:
            return await self._update(p)

    async def _update(self, p: UpdateParams) -> McpServer:
        row = await self.find(p.id)
        given = {f: v for f in edits.EDITABLE if (v := getattr(p, f)) is not msgspec.UNSET}
        if given or not row.user_mcp:  # a user's server is its toolset: its own switch stays usable
            frozen.refuse_changes(row.toolset_id, row.toolset_enabled, None, f"change its server {row.key}")
        if given and not row.user_mcp:
            raise Conflict("declared by a toolset",
                           f"{row.key} comes with the toolset {row.toolset_id!r}, whose manifest says how it runs: "
                           "edit the toolset and import it with replace (here only enabled can change)")
        new = await self._edited(row, given) if given else row
        if not isinstance(p.enabled, msgspec.UnsetType):
            new = msgspec.structs.replace(new, enabled=p.enabled)
        if new != row:
            await self.repo.update(new)
            await self.sync()
        return await self.checked_view(row.key)

    async def _edited(self, row: McpServerRow, given: dict[str, Any]) -> McpServerRow:
        """`row` with the `given` fields changed, checked as mcpServers/add checks a server, and the
        literal secrets among them moved to the secret store.

        A name this server's old config referred to and its new one no longer does is the server's
        to reuse: a new key for ``API_KEY`` replaces the value of ``${WEATHER_API_KEY}`` instead of
        leaving it behind beside a ``${WEATHER_API_KEY_2}``.
        """
        server = row.as_declaration()
        if "type" in given and given["type"] != row.type:  # the fields of the other kind go unless given
            server = edits.retyped(server, given["type"])
        server = msgspec.structs.replace(server, **{
            field: edits.unmasked(field, value, getattr(server, field)) for field, value in given.items()})
        prefix = secrets.Placeholders(prefix=row.server_id).prefix
        before = config_references(config_of(row))
        after = edits.references(server)
        reusable = {n for n in before - after if n.startswith(prefix + "_")}
        names = secrets.Placeholders(set(await self.vault.names()) - reusable, prefix=row.server_id)
        # InvalidParams before any secret is stored.
        new = row.with_declaration(self.toolsets.checked_user_server(edits.placeholders(server, names)))
        stored = names.allocated()
        replaced = {n: await self.vault.get(n) for n in stored if n in reusable}
        try:
            for name, value in stored.items():
                await self.vault.set(name, value)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await edits.restore(self.vault, stored, replaced)
            raise
        return new

    async def remove(self, ref: str) -> None:
        row = await find(self.repo, ref)  # a soft-deleted one too: removing it is uninstalling its toolset
        if not row.user_mcp:
            raise Conflict("declared by a toolset",
                           f"{row.key} comes with the toolset {row.toolset_id!r}: turn it off with "
                           "mcpServers/setEnabled, or uninstall the toolset")
        await self.toolsets.uninstall(row.toolset_id)

    async def set_enabled(self, ref: str, enabled: bool) -> McpServer:
        row = await self.find(ref)
        if not row.user_mcp:  # a user's server is its toolset: its own switch stays usable
            frozen.refuse_changes(row.toolset_id, row.toolset_enabled, None, f"turn its server {row.key} on or off")
        await self.repo.set_enabled(row.toolset_id, row.server_id, enabled)
        await self.sync()
        return await self.get(row.key)

    async def login(self, ref: str, client: OAuthClient | None = None) -> McpServer:
        """Sign in to a remote server with OAuth (the UI opens the page, or with a client-credentials
        client no page is needed), then connect with the tokens. `client`: the user's pre-registered
        client, kept with the sign-in in the secret store."""
        if client is not None:
            check_client(client)
        row = await self.find(ref)
        if not row.should_run:
            raise Conflict("disabled", f"{row.key} is turned off; enable it with mcpServers/setEnabled")
        await self.host.login(row.key, msgspec.to_builtins(client) if client is not None else None)
        return self.view(row)

    async def logout(self, ref: str) -> McpServer:
        """Revoke (where the authorization server can) and forget a server's OAuth tokens and client
        registration; it reconnects, and so needs a sign-in."""
        row = await self.find(ref)
        await self.host.logout(row.key)
        return self.view(row)

    async def forget_sign_ins(self, toolset_id: str) -> None:
        """An uninstalled toolset's servers leave no tokens behind."""
        await signin.forget_toolset(self.vault, toolset_id)

    async def reconnect(self, ref: str) -> McpServer:
        row = await self.find(ref)
        if not row.should_run:
            raise Conflict("disabled", f"{row.key} is turned off; enable it with mcpServers/setEnabled")
        await self.host.reconnect(row.key)
        return self.view(row)

    async def prepare(self, ref: str) -> McpServer:
        """mcpServers/prepare: the server's package installed and its handshake done once (``warm.py``)."""
        row = await self.find(ref)
        await self.host.prepare(row.key)
        return self.view(row)

    # -- asking a connected server (the host raises McpError not_connected otherwise, after a restart's wait) ---

    async def resources(self, ref: str) -> list[dict[str, Any]]:
        row = await self.find(ref)
        return await self.host.list_resources(row.key)

    async def read_resource(self, ref: str, uri: str) -> dict[str, Any]:
        row = await self.find(ref)
        return await self.host.read_resource(row.key, uri)

    async def prompts(self, ref: str) -> list[dict[str, Any]]:
        row = await self.find(ref)
        return await self.host.list_prompts(row.key)

    async def get_prompt(self, ref: str, name: str, args: dict[str, str]) -> dict[str, Any]:
        row = await self.find(ref)
        return await self.host.get_prompt(row.key, name, args)

    # -- importing from other apps (importing.py) -------------------------------------------------------

    async def preview_import(self, path: str | None, project: str | None = None
                             ) -> tuple[list[FoundServer], list[SkippedServer], list[str]]:
        return await self.importer.preview(path, project)

    async def import_(self, p: McpImportParams) -> tuple[list[McpServer], list[SkippedServer], dict[str, str]]:
        return await self.importer.import_(p)

    async def _add_user_server(self, server: ServerDecl) -> ToolsetRow:
        """Add a standalone server, the literal secrets given with it kept in the secret store.

        A token in its env, a header, an argument or its URL is stored under a name of its own
        (``${WEATHER_API_KEY}``) and the server keeps the reference: the database, the toolset's
        manifest and any export never hold the value, ``secrets/list`` shows it with the server
        that uses it, and ``secrets/set`` changes it (the server reconnects). Harmless values
        (``LOG_LEVEL``) stay as given.
        """
        async with self._editing:
            return await self._add_locked(server)

    async def _add_locked(self, server: ServerDecl) -> ToolsetRow:
        names = secrets.Placeholders(await self.vault.names(), prefix=server.id)
        kept = edits.placeholders(server, names)
        stored = names.allocated()
        if not stored:
            return await self.toolsets.add_user_server(server)
        try:
            existing = await self.toolsets.get(server.id)
        except NotFound:
            existing = None
        if existing is not None:  # checked again below; here so nothing is stored for a refused add
            raise Conflict("already installed",
                           f"a server or toolset {server.id!r} exists already; choose another id")
        for name, value in stored.items():
            await self.vault.set(name, value)
        try:
            return await self.toolsets.add_user_server(kept)
        except BaseException:
            with anyio.CancelScope(shield=True):
                for name in stored:
                    await self.vault.delete(name)
            raise

    # -- host events -----------------------------------------------------------------------------------

    async def _host_status(self, state: ServerState) -> None:
        row = await self.repo.by_key(state.key)
        if row is None:
            return  # removed meanwhile
        if state.status == "connected":
            await self._remember_tools(row)
        if self._on_status is not None:
            await self._on_status(self.view(row))

    async def _remember_tools(self, row: McpServerRow) -> None:
        """Keep the definitions the server lists now, so a tool it stops listing can still be shown."""
        listed = {t.name: {"title": t.title, "description": t.description, "inputSchema": t.input_schema,
                           "outputSchema": t.output_schema, "annotations": t.annotations}
                  for t in self.host.tools(row.key)}
        try:
            vanished = await McpToolsSeenRepo(self.repo.db).remember(row.toolset_id, row.server_id, listed)
        except StorageError as exc:
            log.warning("could not record the tools %s lists: %s", row.key, exc.message)
            return
        if vanished:
            log.info("%s no longer lists %s; kept as unavailable (overrides and past calls stay)",
                     row.key, ", ".join(vanished))


def _env_names(row: McpServerRow) -> list[str]:
    """The names a stdio server gets from this machine beyond the basics, and its own env's: never values."""
    if row.type != "stdio":
        return []
    machine = inherited.inherited_names(network=True, package_runners=True, names=row.env_passthrough)
    return sorted({*machine, *row.env})


async def _start_warnings(row: McpServerRow, sandbox: Sandbox) -> list[str]:
    """What will keep a sandboxed stdio server from its own files or its download (server_files.py)."""
    confinement = sandbox_of(row.sandbox) if row.type == "stdio" else None
    if confinement is None or not row.command or secrets.is_reference(row.command) or "${" in row.command:
        return []
    try:
        program = (await resolve_command(row.command, os.environ.get("PATH") or os.defpath, row.cwd)).path
    except CommandNotFound as exc:
        return [str(exc)]
    args = [a for a in row.args if "${" not in a]
    system = [*python_paths(), *SYSTEM]
    return await anyio.to_thread.run_sync(lambda: server_files.unseen(program, args, row.cwd, confinement,
                                                                       sandbox.private, system))

