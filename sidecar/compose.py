"""Build every service once, in dependency order, into one frozen ``Services``.

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

from .api.mcp import ElicitParams
from .chat.chats import ChatService
from .chat.providers.service import ProviderService
from .chat.turns import TurnService
from .errors import NotFound
from .handlers.mcp import server_out
from .handlers.notify import Notifier
from .handlers.toolsets import toolset_out
from .mcp_host.host import McpHost, ServerState
from .runtime.workers import WorkerHost
from .settings import Settings
from .store import Database
from .store.chats import ChatRepo
from .store.tool_calls import ToolCallRepo
from .tools import catalog as registry
from .tools.calls import ToolCallService
from .toolsets import mcp_servers
from .toolsets.authoring import LocalToolsets
from .toolsets.service import ToolsetService
from .workspace.service import WorkspaceService

log = logging.getLogger("sidecar")

OnClose = Callable[[str, Callable[[], Awaitable[None]]], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Services:
    settings: Settings
    started_at: float
    db: Database
    workspace: WorkspaceService
    chats: ChatService
    providers: ProviderService
    workers: WorkerHost
    mcp: McpHost
    tool_calls: ToolCallService
    toolsets: ToolsetService
    local_toolsets: LocalToolsets
    turns: TurnService
    sync_mcp: Callable[[], Awaitable[None]]


async def build(settings: Settings, db: Database, notifier: Notifier, tg: TaskGroup, on_close: OnClose,
                started_at: float) -> Services:
    """Services that run in ``tg``; each one's teardown is handed to ``on_close`` as it is made."""
    data_dir: Path = settings.data_dir
    workspace = WorkspaceService(db, data_dir)
    on_close("workspace watchers", workspace.aclose)
    workspace.bind(tg, notifier.workspace_changed)
    chats = ChatService(workspace)
    providers = ProviderService(db)
    on_close("model providers", providers.aclose)
    await _recover(db)
    workers = WorkerHost()
    on_close("tool workers", workers.aclose)

    async def server_changed(key: str) -> None:
        try:
            row = await mcp_servers.find(db, key)
        except NotFound:
            return  # removed meanwhile
        await notifier.mcp_server_changed(server_out(row, mcp))

    async def status(state: ServerState) -> None:
        await server_changed(state.key)

    async def elicit(key: str, params: dict[str, Any]) -> dict[str, Any]:
        asked = ElicitParams(key, str(params.get("message", "")), params.get("requestedSchema") or {})
        answer = await notifier.elicit(asked)
        return {"action": answer.action} | ({"content": answer.content} if answer.content is not None else {})

    mcp = McpHost(on_status=status, on_tools_changed=server_changed, elicit=elicit)
    mcp.bind(tg)
    tool_calls = ToolCallService(db, workspace, workers, data_dir / "scratch", mcp)
    on_close("tool call records", tool_calls.aclose)
    on_close("MCP servers", mcp.aclose)
    tool_calls.bind(tg)

    async def sync_mcp() -> None:
        """Hand the host the servers the database says should exist (after any change to them)."""
        await mcp.sync([mcp_servers.config_of(r) for r in await mcp_servers.all_servers(db)])

    async def toolset_changed(_toolset_id: str) -> None:
        await sync_mcp()
        await local.refresh()

    async def reloaded(toolset_id: str, error: tuple[str, str] | None) -> None:
        if error is None:
            await notifier.toolset_reloaded(toolset_out(await toolsets.get(toolset_id)))
        else:
            await notifier.toolset_reload_failed(toolset_id, *error)

    toolsets = ToolsetService(db, data_dir, workers, on_change=toolset_changed)
    local = LocalToolsets(toolsets, reloaded)

    async def close_local() -> None:
        local.close()

    on_close("local toolset watcher", close_local)
    await local.bind(tg)
    turns = TurnService(chats, tool_calls, providers)
    tg.start_soon(sync_mcp)
    return Services(settings=settings, started_at=started_at, db=db, workspace=workspace, chats=chats,
                    providers=providers, workers=workers, mcp=mcp, tool_calls=tool_calls, toolsets=toolsets,
                    local_toolsets=local, turns=turns, sync_mcp=sync_mcp)


async def _recover(db: Database) -> None:
    """Bring the database in line with this build and with how the last run ended."""
    await registry.sync_builtins(db)
    failed = await ToolCallRepo(db).fail_unfinished()
    if failed:
        log.warning("%d tool calls were cut off when the sidecar last stopped", failed)
    cut = await ChatRepo(db).fail_streaming()
    if cut:
        log.warning("%d chat turns were cut off when the sidecar last stopped", cut)
