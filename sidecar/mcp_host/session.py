"""A `ClientSession` over an open transport: the handshake, the tool list, serving until lost.

Import this module lazily (`Connector.attempt` does, after loading the SDK): it imports the SDK.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.shared.exceptions import MCPError

from ..api.tools import ToolIcon
from ..secrets import mask_url
from . import remote
from .elicitation import elicitation_callback
from .failures import Failure, handshake_failure, lost_message, with_stderr
from .install import Install
from .logs import ServerLog, at_least, bounded, tell_drops
from .requests import all_pages
from .state import Conn, LiveServer, McpTool
from .stdio import StdioTransport, Streams

if TYPE_CHECKING:
    from .connect import Connector, Spec

log = logging.getLogger("sidecar.mcp_host")

GARBAGE_GRACE = 2.0
"""After a non-JSON stdout line, how long the handshake may still take before we give up."""
CLIENT_NAME = "covalt-sidecar"
CLIENT_VERSION = "0.1.0"


class _Session(ClientSession):
    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        """Left to the tool-call path (tools/result_schema.py), which checks every provider's
        result against its tool's output schema alike: with the same kind of error (badOutput, with
        the path), off the event loop when the result is big, against the schema the catalog shows."""


async def connect_and_serve(connector: Connector, srv: LiveServer, conn: Conn, spec: Spec,
                            streams: Streams | None = None, install: Install | None = None) -> None:
    """Serve ``srv`` until the connection is lost: over ``streams`` (a stdio child's, started by
    the caller while the SDK was loading, with its ``install`` when it is a package runner's first
    start), or over a remote transport opened here."""
    config = srv.config
    async with AsyncExitStack() as stack:
        if streams is not None:
            read, write = streams
        else:
            log.info("MCP server %s: connecting to %s", config.key, mask_url(spec.url))
            opener = remote.sse if config.type == "sse" else remote.streamable_http
            read_timeout = max(300.0, 2 * config.call_timeout)
            auth = await connector.auth_for(config, spec, conn)
            read, write = await stack.enter_async_context(opener(
                spec.url, spec.headers, connect_timeout=config.connect_timeout, read_timeout=read_timeout,
                max_event_size=2 * connector.max_result_bytes, eof=conn.lost, notes=conn.notes, auth=auth))

        session = await stack.enter_async_context(_Session(
            read, write,
            elicitation_callback=(elicitation_callback(srv, lambda request: connector.ask(request))
                                  if connector.elicit is not None else None),
            logging_callback=_logging_callback(srv, connector),
            message_handler=_message_handler(srv, conn),
            client_info=types.Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
        ))

        budget = install.budget if install is not None else config.connect_timeout
        handshake = anyio.CancelScope(deadline=anyio.current_time() + budget)
        garbage = anyio.Event()
        greeted: tuple[types.InitializeResult, list[McpTool]] | None = None
        try:
            async with anyio.create_task_group() as guard:
                if conn.transport is not None:
                    guard.start_soon(_garbage_guard, conn.transport, handshake, garbage)
                    if install is not None:
                        guard.start_soon(install.watch, conn.transport)
                try:
                    with handshake:
                        greeted = (await session.initialize(), await fetch_tools(session))
                finally:
                    guard.cancel_scope.cancel()
        except Exception as exc:
            _hurry_stop(conn)
            if conn.needs_user is not None:
                raise Failure(conn.needs_user, needs_auth=True) from None
            raise Failure(_noted(install, await handshake_failure(config, conn, exc))) from None
        if conn.needs_user is not None:
            raise Failure(conn.needs_user, needs_auth=True)
        if greeted is None:  # the handshake's deadline, or garbage on stdout, cancelled it
            _hurry_stop(conn)
            transport = conn.transport
            if (install is not None and transport is not None and not garbage.is_set()
                    and not conn.lost.is_set() and transport.returncode is None):
                raise Failure(with_stderr(install.timed_out(), transport))
            raise Failure(_noted(install, await handshake_failure(config, conn, None, garbage.is_set())))
        if install is not None:
            srv.installed = True
            await install.connected()
            if conn.transport is not None:  # installed: from now on it stops as any server does
                conn.transport.stop_grace, conn.transport.kill_grace = 1.0, 1.0

        init, tools = greeted
        srv.server_name = init.server_info.name if init.server_info else None
        srv.instructions = (init.instructions or "").strip() or None
        srv.tools = tools
        conn.session = session
        conn.connected = True
        log.info("MCP server %s connected (%s, %d tools)", config.key, srv.server_name, len(tools))
        await _set_log_level(srv, session)
        await srv.set_status("connected")

        async with anyio.create_task_group() as tg:
            tg.start_soon(_refresh_tools, connector, srv, conn)
            if connector.on_log is not None:
                tg.start_soon(tell_drops, srv.log_gate, config.key, connector.on_log)
            await conn.lost.wait()
            tg.cancel_scope.cancel()
        conn.session = None
        if conn.needs_user is not None:
            raise Failure(conn.needs_user, needs_auth=True)
        raise Failure(await lost_message(conn, spec.url))


def _noted(install: Install | None, message: str) -> str:
    """A failed first start of a runner says what was found in its install cache."""
    if install is None or not install.note:
        return message
    return f"{message}\n({install.runner.name}: {install.note})"


def _hurry_stop(conn: Conn) -> None:
    """A child that failed its handshake gets little time to exit on stdin EOF before SIGTERM."""
    if conn.transport is not None:
        conn.transport.stop_grace = min(conn.transport.stop_grace, 0.25)


async def _garbage_guard(transport: StdioTransport, handshake: anyio.CancelScope, garbage: anyio.Event) -> None:
    await transport.garbage_seen.wait()
    await anyio.sleep(GARBAGE_GRACE)
    if not transport.message_seen:
        garbage.set()
        handshake.cancel()


async def fetch_tools(session: ClientSession) -> list[McpTool]:
    caps = session.server_capabilities
    if caps is not None and caps.tools is None:
        return []
    try:
        tools = await all_pages(session, "tools")
    except MCPError as exc:
        if exc.code != types.METHOD_NOT_FOUND:
            raise
        return []
    out: list[McpTool] = []
    for t in tools:
        annotations = t.annotations.model_dump(by_alias=True, mode="json", exclude_none=True) \
            if t.annotations is not None else None
        title = t.title or (t.annotations.title if t.annotations is not None else None)
        out.append(McpTool(name=t.name, title=title, description=t.description or "",
                           input_schema=t.input_schema, output_schema=t.output_schema,
                           annotations=annotations, icons=_icons(t.icons)))
    return out


MAX_ICONS = 8
MAX_ICON_SRC = 64 * 1024


_ICON_SOURCES = ("https://", "data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp")


def _icons(icons: list[types.Icon] | None) -> tuple[ToolIcon, ...]:
    """The icons the UI may show: https or inline raster images only (an http:, file: or
    javascript: src would make the UI fetch or run what the server chose, an SVG may hold script),
    a few, none huge."""
    out: list[ToolIcon] = []
    for icon in icons or ():
        src = icon.src
        if len(src) > MAX_ICON_SRC or not src.lower().startswith(_ICON_SOURCES):
            continue
        out.append(ToolIcon(src=src, mime_type=icon.mime_type, sizes=icon.sizes, theme=icon.theme))
        if len(out) == MAX_ICONS:
            break
    return tuple(out)


async def _refresh_tools(connector: Connector, srv: LiveServer, conn: Conn) -> None:
    while True:
        await conn.tools_dirty.wait()
        conn.tools_dirty = anyio.Event()
        session = conn.session
        assert session is not None  # set before this task starts, cleared after it ends
        try:
            with anyio.fail_after(srv.config.call_timeout):
                tools = await fetch_tools(session)
        except Exception as exc:
            log.warning("MCP server %s: could not refresh its tools: %r", srv.label, exc)
            continue
        srv.tools = tools
        log.info("MCP server %s: tools changed (%d tools)", srv.label, len(tools))
        await srv.publish(tools_changed=True)
        if connector.on_tools_changed is not None:
            try:
                await connector.on_tools_changed(srv.config.key)
            except Exception:
                log.exception("on_tools_changed callback failed for %s", srv.label)


def _message_handler(srv: LiveServer, conn: Conn) -> Any:
    async def handle(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            conn.tools_dirty.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %s: transport reported %r", srv.label, message)

    return handle


def _logging_callback(srv: LiveServer, connector: Connector) -> Any:
    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if not at_least(params.level, srv.config.log_level):
            return
        dropped = srv.log_gate.admit()
        if dropped is None:
            return
        deliver = connector.on_log is not None and srv.current
        if not deliver and not log.isEnabledFor(logging.DEBUG):
            return  # masked and encoded for nobody
        data = bounded(params.data)
        log.debug("MCP server %s logs (%s): %s", srv.label, params.level, data)
        if deliver and connector.on_log is not None:
            try:
                await connector.on_log(ServerLog(srv.config.key, params.level, params.logger, data, dropped))
            except Exception:
                log.exception("on_log callback failed for %s", srv.label)

    return on_log


async def _set_log_level(srv: LiveServer, session: ClientSession) -> None:
    """Ask the server to send only what its level lets through (when it can: else the level is
    applied to what arrives)."""
    level = srv.config.log_level
    caps = session.server_capabilities
    if level is None or caps is None or caps.logging is None:
        return
    try:
        with anyio.fail_after(srv.config.call_timeout):
            # The request itself: the SDK's helper warns that MCP 2026-07-28 deprecates logging,
            # but the servers in use still take it.
            await session.send_request(types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)),
                                       types.EmptyResult)
    except Exception as exc:
        log.warning("MCP server %s: logging/setLevel %s failed: %r", srv.label, level, exc)
