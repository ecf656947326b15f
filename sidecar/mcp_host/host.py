"""`McpHost`: the MCP connections and their supervision. See the package docstring for the contract."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from sidecar.runtime.environment import scrubbed_env

from ..secrets import mask_url
from .commands import CommandNotFound, resolve_command
from .config import SERVER_TYPES, MissingVariable, ServerConfig, resolve, resolve_mapping
from .errors import McpError

if TYPE_CHECKING:  # the SDK is imported in a worker thread on first connect, never at start-up
    from mcp.client.session import ClientSession

    from .stdio import StdioTransport

log = logging.getLogger(__name__)

Status = Literal["connecting", "connected", "error", "disabled"]
OnStatus = Callable[["ServerState"], Awaitable[None]]
OnToolsChanged = Callable[[str], Awaitable[None]]
Elicit = Callable[[str, dict], Awaitable[dict]]
OnProgress = Callable[[float, "float | None", "str | None"], Awaitable[None]]

DEFAULT_MAX_RESULT_BYTES = 32 << 20
BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0
"""A connection that lasted this long resets the reconnect backoff."""
GARBAGE_GRACE = 2.0
"""After a non-JSON stdout line, how long the handshake may still take before we give up."""
STOP_DEADLINE = 10.0
CLIENT_NAME = "covalt-sidecar"
CLIENT_VERSION = "0.1.0"


@dataclass
class ServerState:
    """A snapshot of one server, safe to hand out (the host never mutates it)."""

    key: str
    server_id: str
    toolset_id: str
    type: str
    status: Status
    error: str | None = None
    """What went wrong, with the last lines of the server's stderr when it failed."""
    tool_count: int = 0
    server_name: str | None = None
    """The name the server gave in its initialize answer."""


@dataclass(frozen=True)
class McpTool:
    name: str
    title: str | None
    description: str
    input_schema: dict
    output_schema: dict | None
    annotations: dict | None


# -- internals ----------------------------------------------------------------------------------------


_sdk_loaded = False


def _import_sdk() -> None:
    """Runs in a worker thread: the SDK takes more than half a second to import."""
    import mcp.client.session  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401
    import mcp.shared.exceptions  # noqa: F401
    import mcp_types  # noqa: F401

    from . import remote, stdio  # noqa: F401


class _Failure(Exception):
    """One connection attempt ended; `message` is for the user."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass
class _Spec:
    """A config with its `${VAR}`s resolved and its command found."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


class _Clock:
    """A call's timeout, which stands still while the server waits on the user (elicitation)."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = math.inf if timeout is None or timeout <= 0 else timeout
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + self.timeout)
        self._budget = self.timeout
        self._paused = 0

    def pause(self) -> None:
        if not self._paused:
            self._budget = self.scope.deadline - anyio.current_time()
            self.scope.deadline = math.inf
        self._paused += 1

    def resume(self) -> None:
        self._paused -= 1
        if not self._paused:
            self.scope.deadline = anyio.current_time() + self._budget


class _Conn:
    """One connection attempt and, once the handshake is done, the live connection."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.lost = anyio.Event()
        self.tools_dirty = anyio.Event()
        self.session: ClientSession | None = None
        self.transport: StdioTransport | None = None
        self.notes: list[str] = []
        self.connected = False


class _Server:
    def __init__(self, config: ServerConfig, previous: _Server | None = None) -> None:
        self.config = config
        self.previous = previous
        self.status: Status = "connecting" if config.enabled else "disabled"
        self.error: str | None = None
        self.server_name: str | None = None
        self.tools: list[McpTool] = []
        self.conn: _Conn | None = None
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.wake = anyio.Event()
        self.force = False
        self.clocks: set[_Clock] = set()
        self.elicits = 0
        self.last_published: ServerState | None = None

    def snapshot(self) -> ServerState:
        c = self.config
        return ServerState(key=c.key, server_id=c.server_id, toolset_id=c.toolset_id, type=c.type,
                           status=self.status, error=self.error, tool_count=len(self.tools),
                           server_name=self.server_name)

    @property
    def label(self) -> str:
        return self.config.key


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_flatten(inner))
        return out
    return [exc]


def _json_size(value: Any) -> int:
    """A cheap lower bound of the JSON size of `value` (strings by length, no escaping)."""
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, dict):
            size += 2
            for k, v in item.items():
                size += len(k) + 4
                stack.append(v)
        elif isinstance(item, list | tuple):
            size += 2 + len(item)
            stack.extend(item)
        else:
            size += 8
    return size


def _connection_ended(conn: _Conn, message: str) -> bool:
    """Whether a CONNECTION_CLOSED (-32000) error is the SDK saying the connection is gone, rather than
    a server using -32000 (the first implementation-defined code) for its own errors."""
    if conn.lost.is_set() or conn.scope.cancel_called or message == "Connection closed":
        return True
    # The streamable HTTP transport's words for a request whose response stream broke.
    return conn.transport is None and message.startswith("SSE stream")


def _dump(model: Any) -> dict:
    """A parsed answer back to the JSON the server sent (fields it did not send stay out)."""
    out = model.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude_none=True)
    out.pop("resultType", None)
    return out


class McpHost:
    """Holds the MCP connections of the sidecar. See the package docstring."""

    def __init__(self, *, on_status: OnStatus | None = None, on_tools_changed: OnToolsChanged | None = None,
                 elicit: Elicit | None = None, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self._on_status = on_status
        self._on_tools_changed = on_tools_changed
        self._elicit = elicit
        self.max_result_bytes = max_result_bytes
        self._tg: TaskGroup | None = None
        self._servers: dict[str, _Server] = {}
        self._live: set[_Server] = set()  # every server whose supervisor has not finished, removed ones too
        self._closed = False
        self._sdk_lock: anyio.Lock | None = None

    # -- public API ------------------------------------------------------------------------------------

    def bind(self, tg: TaskGroup) -> None:
        """Give the host the task group its connections live in (the sidecar's)."""
        self._tg = tg

    async def sync(self, configs: Iterable[ServerConfig]) -> None:
        """Make the running set match `configs`; returns at once, connections happen in the background."""
        if self._tg is None:
            raise RuntimeError("McpHost.bind(task_group) must come before sync()")
        if self._closed:  # a late sync during shutdown: nothing may start any more
            log.debug("McpHost.sync after aclose: ignored")
            return
        desired: dict[str, ServerConfig] = {}
        for config in configs:
            if config.key in desired:
                log.warning("MCP server %s is configured twice; the last one wins", config.key)
            desired[config.key] = config
        for key in [k for k in self._servers if k not in desired]:
            srv = self._servers.pop(key)
            log.info("MCP server %s removed", key)
            self._stop(srv)
        announce: list[_Server] = []
        for key, config in desired.items():
            old = self._servers.get(key)
            if old is not None and old.config == config:
                continue
            if old is not None:
                log.info("MCP server %s %s", key, "changed: restarting" if config.enabled else "disabled")
                self._stop(old)
            srv = _Server(config, previous=old)
            self._servers[key] = srv
            if not config.enabled:
                srv.done.set()
                announce.append(srv)
            elif config.type not in SERVER_TYPES:
                srv.status, srv.error = "error", f"unknown server type {config.type!r}"
                srv.done.set()
                announce.append(srv)
            else:
                self._live.add(srv)
                self._tg.start_soon(self._supervise, srv, name=f"mcp {key}")
        for srv in announce:
            await self._publish(srv)

    def states(self) -> list[ServerState]:
        return [srv.snapshot() for srv in self._servers.values()]

    def state(self, key: str) -> ServerState:
        return self._servers[key].snapshot()

    def tools(self, key: str) -> list[McpTool]:
        srv = self._servers.get(key)
        if srv is None or srv.status != "connected":
            return []
        return list(srv.tools)

    async def reconnect(self, key: str) -> None:
        """Force an immediate connection attempt (dropping the current connection, if any)."""
        srv = self._servers[key]
        if not srv.config.enabled or srv.done.is_set():
            return
        srv.force = True
        if srv.conn is not None:
            srv.conn.scope.cancel()
        srv.wake.set()
        await self._set(srv, "connecting")

    async def call_tool(self, key: str, name: str, args: dict, *, timeout: float | None = None,
                        on_progress: OnProgress | None = None) -> dict:
        """Call a tool. Returns `{"content": [...], "structuredContent"?: ..., "isError": bool}`.

        Raises:
            McpError: see `McpError.kind`. Cancelling the awaiting task cancels the request at the server.
        """
        srv, conn, session = await self._ready(key)
        result = await self._request(
            srv, conn, f"tool {name!r}", timeout,
            lambda: session.call_tool(name, args, progress_callback=on_progress))
        out: dict[str, Any] = {
            "content": [_dump(block) for block in result.content],
            "isError": bool(result.is_error),
        }
        if result.structured_content is not None:
            out["structuredContent"] = result.structured_content
        self._check_size(srv, f"tool {name!r}", out)
        return out

    async def list_resources(self, key: str) -> list[dict]:
        return await self._list_all(key, "resources")

    async def read_resource(self, key: str, uri: str) -> dict:
        srv, conn, session = await self._ready(key)
        result = await self._request(srv, conn, f"resource {uri!r}", None, lambda: session.read_resource(uri))
        out = _dump(result)
        self._check_size(srv, f"resource {uri!r}", out)
        return out

    async def list_prompts(self, key: str) -> list[dict]:
        return await self._list_all(key, "prompts")

    async def _list_all(self, key: str, kind: str) -> list[dict]:
        """Every page of ``resources/list`` or ``prompts/list`` ([] when the server has none)."""
        srv, conn, session = await self._ready(key)
        caps = session.server_capabilities
        if caps is not None and getattr(caps, kind) is None:
            return []
        from mcp_types import PaginatedRequestParams

        fetch_page = getattr(session, f"list_{kind}")

        async def fetch() -> list[dict]:
            items: list[dict] = []
            cursor: str | None = None
            for _ in range(100):
                page = await fetch_page(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                items.extend(_dump(item) for item in getattr(page, kind))
                if not page.next_cursor or page.next_cursor == cursor:
                    break
                cursor = page.next_cursor
            return items

        return await self._request(srv, conn, f"{kind}/list", None, fetch)

    async def get_prompt(self, key: str, name: str, args: dict[str, str]) -> dict:
        srv, conn, session = await self._ready(key)
        result = await self._request(srv, conn, f"prompt {name!r}", None, lambda: session.get_prompt(name, args))
        out = _dump(result)
        self._check_size(srv, f"prompt {name!r}", out)
        return out

    async def aclose(self) -> None:
        """Stop every server and wait (bounded) until their processes are gone."""
        self._closed = True
        for srv in list(self._live):
            self._stop(srv)
        self._servers.clear()
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_DEADLINE):
            for srv in list(self._live):
                await srv.done.wait()

    # -- requests --------------------------------------------------------------------------------------

    async def settle(self, key: str) -> None:
        """Return once the server is not (re)connecting, or its connect timeout has passed: a
        call right after a crash waits for the restart instead of failing."""
        srv = self._servers.get(key)
        if srv is None or (srv.status == "connected" and srv.conn is not None and not srv.conn.lost.is_set()):
            return  # the usual case, without arming a timeout
        with anyio.move_on_after(srv.config.connect_timeout):
            while srv.status == "connecting" or (srv.status == "connected" and (
                    srv.conn is None or srv.conn.lost.is_set())):
                await anyio.sleep(0.02)

    async def _ready(self, key: str) -> tuple[_Server, _Conn, ClientSession]:
        await self.settle(key)
        return self._session(key)

    def _session(self, key: str) -> tuple[_Server, _Conn, ClientSession]:
        srv = self._servers.get(key)
        if srv is None:
            raise McpError("not_connected", f"there is no MCP server {key!r}")
        conn = srv.conn
        if srv.status != "connected" or conn is None or conn.session is None or conn.lost.is_set():
            why = {"disabled": "it is disabled", "connecting": "it is still connecting"}.get(srv.status)
            if why is None:
                why = f"it failed: {srv.error}" if srv.error else "it is not connected"
            raise McpError("not_connected", f"MCP server {srv.config.server_id} is not connected: {why}")
        return srv, conn, conn.session

    async def _request(self, srv: _Server, conn: _Conn, what: str, timeout: float | None,
                       make: Callable[[], Awaitable[Any]]) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        from .stdio import TOO_LARGE_CODE

        name = srv.config.server_id
        clock = _Clock(srv.config.call_timeout if timeout is None else timeout)
        for _ in range(srv.elicits):  # each pending elicitation resumes every clock once when it ends
            clock.pause()
        srv.clocks.add(clock)
        try:
            with clock.scope:
                return await make()
        except MCPError as exc:
            err = exc.error
            if err.code == CONNECTION_CLOSED and _connection_ended(conn, err.message):
                # Over HTTP a dead server shows first as a request whose stream broke: drop the
                # connection so the supervisor reconnects (or reports it) instead of waiting for
                # the next request to fail the same way.
                conn.lost.set()
                raise McpError("disconnected", f"MCP server {name}: the connection ended before the answer to "
                                               f"{what} ({err.message})") from None
            if err.code == TOO_LARGE_CODE and isinstance(err.data, dict) and err.data.get("covaltTooLarge"):
                raise McpError("too_large", f"MCP server {name}: the answer to {what} is too large: "
                                            f"{err.message}") from None
            raise McpError("server", f"MCP server {name} failed {what}: {err.message}",
                           code=err.code, data=err.data) from None
        except (ValidationError, RuntimeError) as exc:
            raise McpError("server", f"MCP server {name} gave an invalid answer to {what}: {exc}") from None
        finally:
            srv.clocks.discard(clock)
        # Only reached when the clock's scope swallowed its own deadline: the SDK has already sent
        # notifications/cancelled for the request on the way out.
        raise McpError("timeout", f"MCP server {name} did not answer {what} within {clock.timeout:g} s")

    def _check_size(self, srv: _Server, what: str, out: Any) -> None:
        size = _json_size(out)
        if size > self.max_result_bytes:
            raise McpError("too_large", f"MCP server {srv.config.server_id}: the answer to {what} is about "
                                        f"{size} bytes, over the {self.max_result_bytes}-byte limit")

    # -- state ----------------------------------------------------------------------------------------

    async def _publish(self, srv: _Server) -> None:
        if self._servers.get(srv.config.key) is not srv:
            return  # replaced or removed: its news is stale
        state = srv.snapshot()
        if state == srv.last_published:
            return
        srv.last_published = state
        if self._on_status is not None:
            try:
                await self._on_status(state)
            except Exception:
                log.exception("on_status callback failed for %s", srv.label)

    async def _set(self, srv: _Server, status: Status, error: str | None = None) -> None:
        srv.status, srv.error = status, error
        if status != "connected":
            srv.tools = []
        await self._publish(srv)

    def _stop(self, srv: _Server) -> None:
        srv.scope.cancel()

    # -- supervision -----------------------------------------------------------------------------------

    async def _supervise(self, srv: _Server) -> None:
        try:
            with srv.scope:
                if srv.previous is not None:
                    await srv.previous.done.wait()  # one instance of a server at a time
                    srv.previous = None
                delay = BACKOFF_START
                announce = True
                last_error: str | None = None
                quick_retry = True  # the first drop of a working connection retries at once
                while True:
                    if announce:
                        await self._set(srv, "connecting")
                    srv.force = False
                    srv.wake = anyio.Event()
                    conn = _Conn()
                    started = anyio.current_time()
                    try:
                        await self._attempt(srv, conn)
                        failure = _Failure("the connection ended")
                    except _Failure as exc:
                        failure = exc
                    except Exception as exc:  # a bug of ours or the SDK's: never into the sidecar's group
                        log.exception("MCP server %s: unexpected failure", srv.label)
                        failure = _Failure(f"internal error: {exc!r}")
                    finally:
                        srv.conn = None
                    if conn.connected and anyio.current_time() - started >= STABLE_AFTER:
                        delay, quick_retry = BACKOFF_START, True
                    if srv.force:  # reconnect() asked for a fresh attempt
                        delay, announce = BACKOFF_START, True
                        continue
                    if conn.connected and quick_retry and not failure.permanent:
                        # A crash of a server that worked: restart it now (callers wait for it),
                        # and back off only if it keeps dropping.
                        message = f"disconnected: {failure.message}"
                        log.warning("MCP server %s: %s; reconnecting", srv.label, message)
                        await self._set(srv, "connecting", message)  # the UI still learns why
                        quick_retry, announce = False, False
                        continue
                    message = f"disconnected: {failure.message}" if conn.connected else failure.message
                    if message != last_error:
                        log.warning("MCP server %s: %s", srv.label, message)
                    else:
                        log.debug("MCP server %s: %s (again)", srv.label, message)
                    last_error = message
                    await self._set(srv, "error", message)
                    wait = math.inf if failure.permanent else delay
                    with anyio.move_on_after(wait):
                        await srv.wake.wait()
                    if srv.force:
                        delay, announce = BACKOFF_START, True
                    else:
                        delay, announce = min(delay * 2, BACKOFF_MAX), False
        except Exception:
            log.exception("MCP server %s: supervisor failed", srv.label)
        finally:
            srv.conn = None
            srv.done.set()
            self._live.discard(srv)

    async def _load_sdk(self) -> None:
        global _sdk_loaded
        if _sdk_loaded:
            return
        if self._sdk_lock is None:
            self._sdk_lock = anyio.Lock()
        async with self._sdk_lock:
            if not _sdk_loaded:
                await anyio.to_thread.run_sync(_import_sdk)
                _sdk_loaded = True

    async def _prepare(self, config: ServerConfig) -> _Spec:
        try:
            if config.type == "stdio":
                if not config.command:
                    raise _Failure("no command is set for this stdio server", permanent=True)
                command = resolve(config.command)
                args = [resolve(a) for a in config.args]
                env = scrubbed_env(resolve_mapping(config.env))
                cwd = resolve(config.cwd) if config.cwd else None
                if cwd is not None and not os.path.isdir(cwd):
                    raise _Failure(f"the working directory {cwd} does not exist", permanent=True)
                try:
                    found = await resolve_command(command, env.get("PATH") or os.defpath, cwd)
                except CommandNotFound as exc:
                    raise _Failure(str(exc)) from None
                env["PATH"] = found.child_path
                return _Spec(argv=[found.path, *args], env=env, cwd=cwd)
            if not config.url:
                raise _Failure(f"no URL is set for this {config.type} server", permanent=True)
            url = resolve(config.url)
            if not url.lower().startswith(("http://", "https://")):
                raise _Failure("the URL must start with http:// or https://", permanent=True)
            return _Spec(url=url, headers=resolve_mapping(config.headers))
        except MissingVariable as exc:
            raise _Failure(str(exc), permanent=True) from None

    async def _attempt(self, srv: _Server, conn: _Conn) -> None:
        """One connection: connect, serve until lost. Always ends by raising `_Failure` (or cancellation)."""
        config = srv.config
        spec: _Spec | None = None
        srv.conn = conn
        try:
            with conn.scope:
                await self._load_sdk()
                spec = await self._prepare(config)
                await self._connect_and_serve(srv, conn, spec)
        except BaseException as exc:
            # The SDK's and our transports' task groups wrap whatever crosses them in exception groups.
            leaves = _flatten(exc)
            failures = [e for e in leaves if isinstance(e, _Failure)]
            if failures:
                raise failures[0] from None
            if not isinstance(exc, Exception) or all(
                    isinstance(e, anyio.get_cancelled_exc_class()) for e in leaves):
                raise
            raise _Failure(self._describe(config, spec, exc)) from None
        if conn.scope.cancelled_caught:
            raise _Failure("reconnecting")
        raise _Failure("the connection ended")

    async def _connect_and_serve(self, srv: _Server, conn: _Conn, spec: _Spec) -> None:
        from mcp.client.session import ClientSession
        from mcp_types import Implementation

        from . import remote
        from .stdio import StdioTransport

        config = srv.config
        async with AsyncExitStack() as stack:
            if config.type == "stdio":
                transport = StdioTransport(spec.argv, env=spec.env, cwd=spec.cwd, label=config.key,
                                           max_line=self.max_result_bytes + (1 << 20))
                transport.closed = conn.lost
                conn.transport = transport
                # The args stay out of the log: people put tokens in them.
                log.info("MCP server %s: starting %s (%d args)", config.key, config.command, len(config.args))
                try:
                    read, write = await stack.enter_async_context(transport.open())
                except OSError as exc:
                    raise _Failure(f"could not start {spec.argv[0]}: {exc.strerror or exc}") from None
            else:
                log.info("MCP server %s: connecting to %s", config.key, mask_url(spec.url))
                opener = remote.sse if config.type == "sse" else remote.streamable_http
                read_timeout = max(300.0, 2 * config.call_timeout)
                read, write = await stack.enter_async_context(opener(
                    spec.url, spec.headers, connect_timeout=config.connect_timeout, read_timeout=read_timeout,
                    max_event_size=2 * self.max_result_bytes, eof=conn.lost, notes=conn.notes))

            session = await stack.enter_async_context(ClientSession(
                read, write,
                elicitation_callback=self._elicitation_callback(srv) if self._elicit is not None else None,
                logging_callback=self._logging_callback(srv),
                message_handler=self._message_handler(srv, conn),
                client_info=Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
            ))

            handshake = anyio.CancelScope(deadline=anyio.current_time() + config.connect_timeout)
            reason: list[str] = []
            try:
                async with anyio.create_task_group() as guard:
                    if conn.transport is not None:
                        guard.start_soon(self._garbage_guard, conn.transport, handshake, reason)
                    try:
                        with handshake:
                            init = await session.initialize()
                            tools = await self._fetch_tools(session)
                    finally:
                        guard.cancel_scope.cancel()
            except Exception as exc:
                self._hurry_stop(conn)
                raise _Failure(await self._handshake_failure(config, conn, exc)) from None
            if handshake.cancelled_caught:
                self._hurry_stop(conn)
                raise _Failure(await self._handshake_failure(config, conn, None, reason))

            srv.server_name = init.server_info.name if init.server_info else None
            srv.tools = tools
            conn.session = session
            conn.connected = True
            log.info("MCP server %s connected (%s, %d tools)", config.key, srv.server_name, len(tools))
            await self._set(srv, "connected")

            async with anyio.create_task_group() as tg:
                tg.start_soon(self._refresh_tools, srv, conn)
                await conn.lost.wait()
                tg.cancel_scope.cancel()
            conn.session = None
            raise _Failure(await self._lost_message(config, conn, spec))

    @staticmethod
    def _hurry_stop(conn: _Conn) -> None:
        """A child that failed its handshake gets little time to exit on stdin EOF before SIGTERM."""
        if conn.transport is not None:
            conn.transport.stop_grace = min(conn.transport.stop_grace, 0.25)

    async def _garbage_guard(self, transport: StdioTransport, handshake: anyio.CancelScope,
                             reason: list[str]) -> None:
        await transport.garbage_seen.wait()
        await anyio.sleep(GARBAGE_GRACE)
        if not transport.message_seen:
            reason.append("garbage")
            handshake.cancel()

    async def _fetch_tools(self, session: ClientSession) -> list[McpTool]:
        from mcp.shared.exceptions import MCPError
        from mcp_types import METHOD_NOT_FOUND, PaginatedRequestParams

        caps = session.server_capabilities
        if caps is not None and caps.tools is None:
            return []
        tools: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        try:
            for _ in range(100):
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor or cursor in seen:
                    break
                seen.add(cursor)
        except MCPError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            return []
        out = []
        for t in tools:
            annotations = t.annotations.model_dump(by_alias=True, mode="json", exclude_none=True) \
                if t.annotations is not None else None
            title = t.title or (t.annotations.title if t.annotations is not None else None)
            out.append(McpTool(name=t.name, title=title, description=t.description or "",
                               input_schema=t.input_schema, output_schema=t.output_schema,
                               annotations=annotations))
        return out

    async def _refresh_tools(self, srv: _Server, conn: _Conn) -> None:
        while True:
            await conn.tools_dirty.wait()
            conn.tools_dirty = anyio.Event()
            assert conn.session is not None
            try:
                with anyio.fail_after(srv.config.call_timeout):
                    tools = await self._fetch_tools(conn.session)
            except Exception as exc:
                log.warning("MCP server %s: could not refresh its tools: %r", srv.label, exc)
                continue
            srv.tools = tools
            log.info("MCP server %s: tools changed (%d tools)", srv.label, len(tools))
            await self._publish(srv)
            if self._on_tools_changed is not None:
                try:
                    await self._on_tools_changed(srv.config.key)
                except Exception:
                    log.exception("on_tools_changed callback failed for %s", srv.label)

    # -- SDK callbacks ---------------------------------------------------------------------------------

    def _message_handler(self, srv: _Server, conn: _Conn) -> Callable[[Any], Awaitable[None]]:
        from mcp_types import ToolListChangedNotification

        async def handle(message: Any) -> None:
            if isinstance(message, ToolListChangedNotification):
                conn.tools_dirty.set()
            elif isinstance(message, Exception):
                log.debug("MCP server %s: transport reported %r", srv.label, message)

        return handle

    def _logging_callback(self, srv: _Server) -> Callable[[Any], Awaitable[None]]:
        async def on_log(params: Any) -> None:
            log.debug("MCP server %s logs (%s): %s", srv.label, params.level, params.data)

        return on_log

    def _elicitation_callback(self, srv: _Server) -> Callable[[Any, Any], Awaitable[Any]]:
        import mcp_types as types

        async def on_elicit(context: Any, params: Any) -> Any:
            elicit = self._elicit
            if elicit is None:
                return types.ErrorData(code=types.INVALID_REQUEST, message="Elicitation not supported")
            srv.elicits += 1
            for clock in srv.clocks:
                clock.pause()
            try:
                answer = await elicit(srv.config.key, params.model_dump(by_alias=True, mode="json", exclude_none=True))
                return types.ElicitResult.model_validate(answer)
            except Exception as exc:
                log.warning("MCP server %s: elicitation failed: %r", srv.label, exc)
                return types.ErrorData(code=types.INTERNAL_ERROR, message="the client could not answer the elicitation")
            finally:
                srv.elicits -= 1
                for clock in srv.clocks:
                    clock.resume()

        return on_elicit

    # -- messages for the user -------------------------------------------------------------------------

    @staticmethod
    def _with_stderr(message: str, transport: StdioTransport | None) -> str:
        if transport is not None and transport.stderr_tail:
            return f"{message}. Last lines of its stderr:\n{transport.stderr_text()}"
        return message

    @staticmethod
    def _garbage_note(transport: StdioTransport | None) -> str:
        if transport is None or not transport.garbage:
            return ""
        return (f"; it wrote something other than JSON-RPC to stdout (is this an MCP stdio server?): "
                f"{transport.garbage[0]!r}")

    async def _handshake_failure(self, config: ServerConfig, conn: _Conn, exc: BaseException | None,
                                 reason: list[str] | None = None) -> str:
        from .stdio import describe_returncode

        transport = conn.transport
        if transport is not None and (conn.lost.is_set() or transport.returncode is not None):
            code = await transport.wait_exited(1.0)
            what = describe_returncode(code) if code is not None else "closed its stdout"
            message = f"the server {what} before completing the MCP handshake{self._garbage_note(transport)}"
            return self._with_stderr(message, transport)
        if exc is None:
            if reason and transport is not None:
                message = f"the server did not complete the MCP handshake{self._garbage_note(transport)}"
            else:
                message = (f"no answer to the MCP handshake within {config.connect_timeout:g} s"
                           f"{self._garbage_note(transport)}")
            return self._with_stderr(message, transport)
        if conn.lost.is_set() and conn.notes:
            return f"the connection was lost during the MCP handshake: {conn.notes[-1]}"
        return self._with_stderr(self._describe(config, None, exc), transport)

    async def _lost_message(self, config: ServerConfig, conn: _Conn, spec: _Spec) -> str:
        from .stdio import describe_returncode

        transport = conn.transport
        if transport is not None:
            code = await transport.wait_exited(1.0)
            what = describe_returncode(code) if code is not None else "closed its stdout"
            return self._with_stderr(f"the server {what}", transport)
        message = f"the connection to {mask_url(spec.url)} was closed"
        return f"{message}: {conn.notes[-1]}" if conn.notes else message

    def _describe(self, config: ServerConfig, spec: _Spec | None, exc: BaseException) -> str:
        """Words for an exception out of a transport or the SDK (URLs masked: they may carry tokens)."""
        import httpx2
        from mcp.shared.exceptions import MCPError

        from . import remote

        url = mask_url(spec.url) if spec is not None and spec.url else mask_url(config.url or "")
        leaves = [e for e in _flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())] or [exc]
        for e in leaves:
            if isinstance(e, remote.TransportLost):
                return str(e)
            if isinstance(e, httpx2.ConnectTimeout):
                return f"cannot connect to {url}: timed out"
            if isinstance(e, httpx2.ConnectError):
                return f"cannot connect to {url}: nothing is listening there or the connection was refused"
            if isinstance(e, httpx2.HTTPStatusError):
                return f"HTTP {e.response.status_code} from {url}"
            if isinstance(e, httpx2.HTTPError):
                return f"HTTP request to {url} failed: {type(e).__name__}"
            if isinstance(e, MCPError):
                return f"the server answered the MCP handshake with an error: {e.error.message}"
            if isinstance(e, TimeoutError):
                return f"no answer within {config.connect_timeout:g} s"
        e = leaves[0]
        text = f"{type(e).__name__}: {e}"
        for raw in {spec.url if spec is not None else "", config.url or ""} - {""}:
            text = text.replace(raw, url)  # never the token-bearing URL
        return text
