"""Build every service once, in dependency order, into one frozen ``Services``, and give each
handler area the services it needs (``service_routes``).

Collaborators go in through constructors. Where two services need each other's events (the
toolsets and the MCP host; the MCP host and the UI), the wiring is a closure here, so no service
holds a listener list or is finished by a setter after it was built.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anyio.abc import TaskGroup

from . import process
from .chat.chats import ChatService
from .chat.offer import SelectionSettings
from .chat.providers.service import ProviderService
from .chat.turns import TurnService
from .embedding import EmbeddingModel
from .errors import NotFound, StorageError
from .handlers.authoring import AuthoringHandlers
from .handlers.bundles import BundleHandlers
from .handlers.chats import ChatHandlers
from .handlers.config import ConfigHandlers
from .handlers.debug import DebugHandlers
from .handlers.limits import LimitHandlers
from .handlers.mcp import McpHandlers
from .handlers.notify import Notifier
from .handlers.providers import ProviderHandlers
from .handlers.relevance import RelevanceHandlers
from .handlers.routes import routes
from .handlers.schedules import ScheduleHandlers
from .handlers.search import SearchHandlers
from .handlers.secrets import SecretHandlers
from .handlers.settings import SettingsHandlers, current
from .handlers.tool_calls import ToolCallHandlers
from .handlers.toolsets import ToolsetHandlers
from .handlers.workspace import WorkspaceHandlers
from .mcp_host.servers import McpServers
from .sandbox.detect import RECORD_FILE, Detected
from .sandbox.egress import Egress
from .sandbox.runner import Sandbox
from .schedules.clock import Clock
from .schedules.service import Schedules
from .secrets.store import SecretStore
from .settings import Settings
from .store import Database
from .store.chats import ChatRepo
from .store.tool_calls import ToolCallRepo
from .tools.audit import AuditTrail
from .tools.calls import ToolCallService
from .tools.catalog import Catalog
from .tools.config import ToolConfig
from .tools.listing import ToolListing
from .tools.providers.builtin.runner import BuiltinRunner
from .tools.providers.http.oauth import OAuthTokens
from .tools.providers.http.runner import HttpTools
from .tools.providers.mcp_runner import McpRunner
from .tools.providers.python.runner import PythonRunner
from .tools.providers.python.workers import WorkerHost
from .tools.relevance import Relevance
from .tools.runner import ToolRunner
from .tools.search import ToolSearch
from .tools.switch import ToolSwitch
from .toolsets.authoring import LocalToolsets
from .toolsets.download import Downloader
from .toolsets.reaper import Reaper
from .toolsets.remote import RemoteBundles
from .toolsets.service import ToolsetService
from .toolsets.user_made import UserToolsets
from .workspace.service import WorkspaceService

log = logging.getLogger("sidecar")

OnClose = Callable[[str, Callable[[], Awaitable[None]]], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Services:
    settings: Settings
    started_at: float
    db: Database
    secrets: SecretStore
    workspace: WorkspaceService
    chats: ChatService
    providers: ProviderService
    mcp_servers: McpServers
    catalog: Catalog
    search: ToolSearch
    relevance: Relevance  # which tools fit a text: words fused with a local embedding model (seed 004)
    tool_calls: ToolCallService
    audit: AuditTrail  # toolCalls/list and export over the records tool_calls writes
    listing: ToolListing  # tools/list pages, and the usage tools/list and tools/get show
    toolsets: ToolsetService
    user_toolsets: UserToolsets  # toolsets made in the UI and the HTTP tools put into them
    turns: TurnService
    config: ToolConfig
    switch: ToolSwitch  # the user's kill switch over every tool call
    selection: SelectionSettings  # the user's settings of which tools a chat turn offers
    selection_changed: Callable[[list[str]], Awaitable[None]]  # settings/changed for them
    oauth: OAuthTokens  # HTTP tools' OAuth2 tokens: one cache, one lock per tool
    schedules: Schedules
    bundles: RemoteBundles  # toolsets installed from a URL: import, checkUpdate, upgrade
    sandbox: Sandbox  # what confines tool processes (debug/info and initialize report it)


async def build(settings: Settings, db: Database, notifier: Notifier, tg: TaskGroup, on_close: OnClose,
                started_at: float, *, clock: Clock | None = None, sandbox_reported: Detected | None = None) -> Services:
    """Services that run in ``tg``; each one's teardown is handed to ``on_close`` as it is made
    (``clock``: the schedules' sense of time, the wall clock unless a test brings its own;
    ``sandbox_reported``: what ``initialize`` said confines tools, checked against the probe)."""
    data_dir: Path = settings.data_dir

    async def secret_changed(name: str) -> None:
        providers.variable_changed(name)
        await servers.variable_changed(name)  # a server waiting on a missing variable connects now

    secrets = SecretStore(data_dir, settings.secrets_backend, on_change=secret_changed)
    if secrets.chosen and secrets.backend == "keystore":
        tg.start_soon(secrets.warm)  # finds a locked or missing keystore now, not at the first tool call
    workspace = WorkspaceService(db, data_dir, on_change=notifier.workspace_changed,
                                 on_unversioned=notifier.workspace_unversioned,
                                 max_upload_bytes=settings.max_upload_bytes)
    on_close("workspace watchers", workspace.aclose)
    workspace.bind(tg)
    tg.start_soon(workspace.finish_switches)  # branch switches the last run was killed in
    chats = ChatService(workspace)
    providers = ProviderService(db, secrets)
    oauth = OAuthTokens(secrets)
    on_close("model providers", providers.aclose)
    tg.start_soon(_move_provider_keys, providers)
    egress = Egress()  # the allowedHosts proxies of sandboxed tools
    egress.bind(tg)
    on_close("sandbox network proxies", egress.aclose)
    sandbox = Sandbox(settings.sandbox, egress, record=data_dir / RECORD_FILE)
    if sandbox_reported is not None:
        tg.start_soon(sandbox.verify, sandbox_reported, notifier.sandbox_changed)
    workers = WorkerHost(sandbox=sandbox)
    on_close("tool workers", workers.aclose)

    async def toolset_changed(toolset_id: str) -> None:
        await config.reconcile(toolset_id)  # an upgrade keeps the values its schema still has
        try:
            await toolsets.get(toolset_id)
        except NotFound:
            await oauth.forget(toolset_id)  # uninstalled: its cached tokens leave the secret store
            await servers.forget_sign_ins(toolset_id)
        await servers.sync()
        await local.refresh()
        await schedules.toolset_changed(toolset_id)  # manifest triggers follow; a gone tool pauses its schedules

    async def reloaded(toolset_id: str, error: tuple[str, str] | None) -> None:
        if error is None:
            await notifier.toolset_reloaded(await toolsets.get(toolset_id))
        else:
            await notifier.toolset_reload_failed(toolset_id, *error)

    toolsets = ToolsetService(db, data_dir, workers, secrets, on_change=toolset_changed)
    servers = McpServers(db, toolsets, secrets, on_status=notifier.mcp_server_changed, elicit=notifier.elicit,
                         on_log=notifier.mcp_log, open_url=notifier.open_url,
                         client_metadata_url=settings.oauth_client_metadata_url, sandbox=sandbox,
                         installs=data_dir / "mcp-installs")
    servers.bind(tg)
    catalog = Catalog(db, servers.host, data_dir, sandbox)
    await _recover(db, catalog, data_dir)
    config = ToolConfig(db, catalog, secrets)
    http_tools = HttpTools(secrets.environ, oauth, default_timeout=workers.limits.default_timeout)
    on_close("HTTP tool connections", http_tools.aclose)
    async def switched(enabled: bool) -> None:
        schedules.wake()  # off: nothing fires; on again: what fell due meanwhile follows each one's `missed`
        await notifier.settings_changed(current(switch, selection), ["toolsEnabled"])

    switch = await ToolSwitch.load(db, on_change=switched)
    selection = await SelectionSettings.load(db)

    async def selection_changed(changed: list[str]) -> None:
        await notifier.settings_changed(current(switch, selection), changed)

    # One runner per provider: the call path resolves a tool once and hands it to its provider's.
    runners: dict[str, ToolRunner] = {
        "builtin": BuiltinRunner(sandbox, default_timeout=workers.limits.default_timeout),
        "python": PythonRunner(workers), "http": http_tools, "mcp": McpRunner(servers.host)}
    tool_calls = ToolCallService(db, workspace, runners, data_dir / "scratch", catalog, config, switch)
    on_close("tool call records", tool_calls.aclose)
    on_close("MCP servers", servers.aclose)  # closed first: calls still running end before their records
    tool_calls.bind(tg)
    listing = ToolListing(catalog, tool_calls.repo)
    search = ToolSearch(db, catalog, listing.with_usage)
    # The model loads on a thread a few seconds after start (or at the first ranking): initialize
    # never waits for it, and a missing or corrupt file only makes tools rank by words.
    model = EmbeddingModel.from_settings(settings.embedding_model, settings.embedding_tokenizer)
    relevance = Relevance(db, catalog, model, search.lexical)
    relevance.bind(tg)
    turns = TurnService(db, chats, workspace, tool_calls, providers, catalog, switch, relevance, selection)
    schedules = Schedules(db, workspace, tool_calls, turns, catalog, providers, fired=notifier.schedule_fired,
                          chat_event=notifier.chat_event, confirm=notifier.confirm_tool_call, clock=clock,
                          tools_enabled=lambda: switch.enabled)
    on_close("schedules", schedules.aclose)  # closed before the tool call records: no run starts after
    schedules.bind(tg)
    local = LocalToolsets(toolsets, reloaded)

    async def close_local() -> None:
        local.close()

    on_close("local toolset watcher", close_local)
    await local.bind(tg)
    reaper = Reaper(toolsets, settings.soft_delete_retention)
    on_close("toolset reaper", reaper.aclose)
    tg.start_soon(reaper.run)  # a first pass now, then periodically
    await servers.sync()  # returns at once: the servers connect in the background
    return Services(settings=settings, started_at=started_at, db=db, secrets=secrets, workspace=workspace, chats=chats,
                    providers=providers, mcp_servers=servers, catalog=catalog, tool_calls=tool_calls,
                    toolsets=toolsets, user_toolsets=UserToolsets(db, toolsets),
                    turns=turns, config=config, switch=switch, selection=selection,
                    selection_changed=selection_changed, oauth=oauth,
                    audit=AuditTrail(tool_calls.repo, data_dir), schedules=schedules,
                    listing=listing, search=search, relevance=relevance,
                    bundles=RemoteBundles(toolsets, Downloader(data_dir / "downloads",
                                                               max_bytes=settings.max_bundle_bytes)),
                    sandbox=sandbox)


async def _move_provider_keys(providers: ProviderService) -> None:
    """Keys an earlier version kept in the database go to the secret store (in the background: the
    keystore may take a while; until then a row's literal key still works)."""
    try:
        await providers.move_keys_to_store()
    except StorageError as exc:
        log.warning("provider API keys stay in the database until the next start: %s", exc.message)


async def _recover(db: Database, catalog: Catalog, data_dir: Path) -> None:
    """Bring the database and the data directory in line with this build and with how the last run ended."""
    process.sweep_crash_leftovers(data_dir)
    await catalog.sync_builtins()
    failed = await ToolCallRepo(db).fail_unfinished()
    if failed:
        log.warning("%d tool calls were cut off when the sidecar last stopped", failed)
    cut = await ChatRepo(db).fail_streaming()
    if cut:
        log.warning("%d chat turns were cut off when the sidecar last stopped", cut)


def service_routes(s: Services) -> dict[str, Any]:
    """Each handler area over the services it gets: the method table the app serves."""
    found: dict[str, Any] = {}
    for area in (
        AuthoringHandlers(s.user_toolsets, s.catalog),
        BundleHandlers(s.toolsets, s.bundles, s.catalog, s.mcp_servers),
        ChatHandlers(s.chats, s.turns, s.workspace, s.tool_calls.repo),
        ConfigHandlers(s.config),
        DebugHandlers(s.settings, s.db, s.started_at, s.secrets, s.switch, s.sandbox, s.relevance),
        LimitHandlers(s.catalog),
        McpHandlers(s.mcp_servers),
        ProviderHandlers(s.providers),
        ScheduleHandlers(s.schedules),
        RelevanceHandlers(s.relevance, s.chats, s.catalog, s.listing.with_usage, s.switch),
        SearchHandlers(s.search),
        SecretHandlers(s.secrets, s.mcp_servers, s.providers),
        SettingsHandlers(s.switch, s.selection, s.selection_changed),
        ToolCallHandlers(s.audit),
        ToolsetHandlers(s.toolsets, s.tool_calls, s.catalog, s.chats, s.listing, s.switch),
        WorkspaceHandlers(s.workspace, s.chats),
    ):
        for name, handler in routes(area).items():
            if name in found:
                raise RuntimeError(f"{name!r} is served by two areas")
            found[name] = handler
    return found
