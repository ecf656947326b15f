"""Requests to a connected server: tools, resources, prompts, with timeouts, cancellation and the
way their failures become `McpError`.

Import this module lazily: it imports the SDK and pydantic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..errors import McpError
from .state import CallClock, CallOrigin, Conn, LiveServer, Pending
from .stdio import TOO_LARGE_CODE

T = TypeVar("T")
OnProgress = Callable[[float, "float | None", "str | None"], Awaitable[None]]


def _progress_callback(on_progress: OnProgress | None) -> ProgressFnT | None:
    """The SDK's callback protocol names its parameters; ours is positional."""
    if on_progress is None:
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        await on_progress(progress, total, message)

    return report


def json_size(value: Any) -> int:
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


def _connection_ended(conn: Conn, message: str) -> bool:
    """Whether a CONNECTION_CLOSED (-32000) error is the SDK saying the connection is gone, rather than
    a server using -32000 (the first implementation-defined code) for its own errors."""
    if conn.lost.is_set() or conn.scope.cancel_called or message == "Connection closed":
        return True
    # The streamable HTTP transport's words for a request whose response stream broke.
    return conn.transport is None and message.startswith("SSE stream")


def dump(model: Any) -> dict[str, Any]:
    """A parsed answer back to the JSON the server sent (fields it did not send stay out)."""
    out: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude_none=True)
    out.pop("resultType", None)
    return out


def check_size(srv: LiveServer, what: str, out: Any, limit: int) -> None:
    size = json_size(out)
    if size > limit:
        raise McpError("too_large", f"MCP server {srv.config.server_id}: the answer to {what} is about "
                                    f"{size} bytes, over the {limit}-byte limit", server=srv.config.key)


async def request(srv: LiveServer, conn: Conn, what: str,
                  timeout: float | None,  # noqa: ASYNC109 - a CallClock: it stands still during elicitations
                  make: Callable[[], Awaitable[T]], origin: CallOrigin | None = None) -> T:
    name, key = srv.config.server_id, srv.config.key
    pending = Pending(CallClock(srv.config.call_timeout if timeout is None else timeout), origin)
    clock = pending.clock
    for _ in range(srv.elicits):  # each pending elicitation resumes every clock once when it ends
        clock.pause()
    srv.pending.add(pending)
    try:
        with clock.scope:
            result = await make()
            _check_answer(pending, srv, what)
            return result
        # Only reached when the clock's scope swallowed its own deadline: the SDK has already sent
        # notifications/cancelled for the request on the way out.
        raise McpError("timeout", f"MCP server {name} did not answer {what} within {clock.timeout:g} s",
                       server=key)
    except MCPError as exc:
        _check_answer(pending, srv, what)
        err = exc.error
        if err.code == types.CONNECTION_CLOSED and _connection_ended(conn, err.message):
            # Over HTTP a dead server shows first as a request whose stream broke: drop the
            # connection so the supervisor reconnects (or reports it) instead of waiting for
            # the next request to fail the same way.
            conn.lost.set()
            if conn.needs_user is not None:  # a 401 or a scope step-up: say what the user can do
                raise McpError("disconnected", f"MCP server {name} did not run {what}: {conn.needs_user}",
                               server=key) from None
            if conn.transport is not None and (killed := conn.transport.memory_killed()) is not None:
                raise McpError("disconnected", f"MCP server {name} {killed} before answering {what}",
                               server=key) from None
            raise McpError("disconnected", f"MCP server {name}: the connection ended before the answer to "
                                           f"{what} ({err.message})", server=key) from None
        if err.code == TOO_LARGE_CODE and isinstance(err.data, dict) and err.data.get("covaltTooLarge"):
            raise McpError("too_large", f"MCP server {name}: the answer to {what} is too large: "
                                        f"{err.message}", server=key) from None
        raise McpError("server", f"MCP server {name} failed {what}: {err.message}",
                       server=key, server_code=err.code, server_data=err.data) from None
    except (ValidationError, RuntimeError) as exc:
        raise McpError("server", f"MCP server {name} gave an invalid answer to {what}: {_reason(exc)}",
                       server=key) from None
    finally:
        srv.pending.discard(pending)


def _reason(exc: Exception) -> str:
    """What was wrong with an answer, on one line (a structuredContent that breaks its tool's
    outputSchema is not one: the tool-call path checks that, tools/result_schema.py)."""
    return str(exc).split("\n", 1)[0]


def _check_answer(pending: Pending, srv: LiveServer, what: str) -> None:
    if pending.refused_answer is not None:
        raise McpError("elicitation", f"MCP server {srv.config.server_id} asked for input during {what} and the "
                                      f"answer did not fit its form ({pending.refused_answer}); the server was "
                                      "told the question was cancelled", server=srv.config.key)


async def call_tool(srv: LiveServer, conn: Conn, session: ClientSession, name: str, args: dict[str, Any], *,
                    timeout: float | None,  # noqa: ASYNC109 - a CallClock: it stands still during elicitations
                    on_progress: OnProgress | None, origin: CallOrigin | None,
                    limit: int) -> dict[str, Any]:
    what = f"tool {name!r}"
    result = await request(srv, conn, what, timeout,
                           lambda: session.call_tool(name, args, progress_callback=_progress_callback(on_progress)),
                           origin)
    out: dict[str, Any] = {
        "content": [dump(block) for block in result.content],
        "isError": bool(result.is_error),
    }
    if result.structured_content is not None:
        out["structuredContent"] = result.structured_content
    check_size(srv, what, out, limit)
    return out


async def all_pages(session: ClientSession, kind: str) -> list[Any]:
    """Every item of a paginated ``tools/list``, ``resources/list`` or ``prompts/list`` (at most
    100 pages; a cursor seen before ends it)."""
    fetch_page = getattr(session, f"list_{kind}")
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(100):
        page = await fetch_page(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items.extend(getattr(page, kind))
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    return items


async def list_all(srv: LiveServer, conn: Conn, session: ClientSession, kind: str) -> list[dict[str, Any]]:
    """Every page of ``resources/list`` or ``prompts/list`` ([] when the server has none)."""
    caps = session.server_capabilities
    if caps is not None and getattr(caps, kind) is None:
        return []

    async def fetch() -> list[dict[str, Any]]:
        return [dump(item) for item in await all_pages(session, kind)]

    return await request(srv, conn, f"{kind}/list", None, fetch)


async def read_resource(srv: LiveServer, conn: Conn, session: ClientSession, uri: str, limit: int) -> dict[str, Any]:
    what = f"resource {uri!r}"
    out = dump(await request(srv, conn, what, None, lambda: session.read_resource(uri)))
    check_size(srv, what, out, limit)
    return out


async def get_prompt(srv: LiveServer, conn: Conn, session: ClientSession, name: str, args: dict[str, str],
                     limit: int) -> dict[str, Any]:
    what = f"prompt {name!r}"
    out = dump(await request(srv, conn, what, None, lambda: session.get_prompt(name, args)))
    check_size(srv, what, out, limit)
    return out
