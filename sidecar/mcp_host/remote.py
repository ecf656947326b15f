"""The HTTP transports: legacy SSE (ours) and streamable HTTP (the SDK's), both watched for EOF.

SSE is ours because the SDK's `sse_client` reads events with httpx's fixed 1 MiB event cap (a 10 MB
tool result would kill the connection) and leaves a request whose POST failed waiting forever. Here
the event cap is settable, and a failed POST or a broken event stream ends the connection, which
fails every pending request at once and lets the supervisor reconnect.

Import this module lazily: it imports the SDK and httpx2.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ..secrets import mask_url

log = logging.getLogger(__name__)


class TransportLost(Exception):
    """The transport ended; `str()` says why in words for the user."""


class EofWatch:
    """A read stream wrapper that records when (and why) the stream ended."""

    def __init__(self, inner: Any, on_eof: anyio.Event) -> None:
        self._inner = inner
        self._on_eof = on_eof
        self.last_exception: Exception | None = None

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof.set()
            raise
        if isinstance(item, Exception):
            self.last_exception = item
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> EofWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> EofWatch:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
        await self.aclose()


def _http_timeout(connect_timeout: float, read_timeout: float) -> httpx2.Timeout:
    return httpx2.Timeout(connect_timeout, read=read_timeout)


@asynccontextmanager
async def streamable_http(url: str, headers: Mapping[str, str], *, connect_timeout: float,
                          read_timeout: float, max_event_size: int, eof: anyio.Event,
                          notes: list[str], auth: httpx2.Auth | None = None) -> AsyncIterator[tuple[Any, Any]]:
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(headers), timeout=_http_timeout(connect_timeout, read_timeout),
                               auth=auth))
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=client, max_sse_event_size=max_event_size))
        yield EofWatch(read, eof), write


def _check_stream(response: httpx2.Response, url: str) -> None:
    if response.status_code >= 400:
        raise TransportLost(f"HTTP {response.status_code} from {mask_url(url)}")
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "text/event-stream":
        raise TransportLost(f"{mask_url(url)} answered {content_type or 'no content type'}, "
                            "not an event stream: is this an SSE endpoint?")


def _endpoint(url: str, data: str) -> str:
    endpoint = urljoin(url, data)
    a, b = urlsplit(url), urlsplit(endpoint)
    if (a.scheme, a.netloc) != (b.scheme, b.netloc):
        raise TransportLost("the SSE endpoint event points to another origin")
    return endpoint


def _message(url: str, data: str) -> SessionMessage | None:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(data, by_name=False))
    except ValueError:
        log.warning("non-JSON-RPC SSE message from %s: %r", mask_url(url), data[:300])
        return None


async def _post_all(client: httpx2.AsyncClient, endpoint: str, outgoing: MemoryObjectReceiveStream[SessionMessage],
                    incoming: MemoryObjectSendStream[SessionMessage | Exception], notes: list[str]) -> None:
    async with outgoing:
        async for message in outgoing:
            body = message.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            try:
                resp = await client.post(endpoint, json=body)
            except httpx2.HTTPError as exc:
                notes.append(f"POST to {mask_url(endpoint)} failed: {type(exc).__name__}")
                break
            if resp.status_code >= 400:
                notes.append(f"HTTP {resp.status_code} for a POST to {mask_url(endpoint)}")
                break
    # A message that could not be delivered ends the connection: its answer will never come.
    await incoming.aclose()


@asynccontextmanager
async def sse(url: str, headers: Mapping[str, str], *, connect_timeout: float, read_timeout: float,
              max_event_size: int, eof: anyio.Event, notes: list[str],
              auth: httpx2.Auth | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """Legacy HTTP+SSE: GET an event stream, learn the POST endpoint from its `endpoint` event.

    Connecting (TCP, the response headers, the endpoint event) is bounded by `connect_timeout`.
    Why the connection ended, when we know, is appended to `notes`.
    """
    timeout = _http_timeout(connect_timeout, read_timeout)
    async with httpx2.AsyncClient(headers=dict(headers), timeout=timeout, auth=auth) as client:
        read_w, read_r = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_w, write_r = anyio.create_memory_object_stream[SessionMessage](0)

        async def reader(*, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
            started = False
            async with read_w:
                try:
                    async with client.stream("GET", url, headers={"Accept": "text/event-stream",
                                                                  "Cache-Control": "no-store"}) as response:
                        _check_stream(response, url)
                        async for event in httpx2.EventSource(response, max_event_size=max_event_size):
                            if event.event == "endpoint":
                                endpoint = _endpoint(url, event.data)
                                if not started:
                                    started = True
                                    task_status.started(endpoint)
                            elif event.event == "message" and event.data:
                                message = _message(url, event.data)
                                if message is not None:
                                    await read_w.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                except httpx2.SSEError as exc:
                    notes.append(f"bad event stream from {mask_url(url)}: {exc}")
                except httpx2.HTTPError:
                    if not started:
                        raise
                    notes.append(f"the event stream from {mask_url(url)} broke")
                if not started:
                    raise TransportLost(notes[-1] if notes else
                                        f"the event stream from {mask_url(url)} ended before its endpoint event")
                log.debug("SSE stream from %s ended", mask_url(url))

        async with anyio.create_task_group() as tg:
            try:
                with anyio.fail_after(connect_timeout):
                    endpoint = await tg.start(reader)
            except TimeoutError:
                raise TransportLost(
                    f"{mask_url(url)} sent no SSE endpoint event within {connect_timeout:g} s") from None
            tg.start_soon(_post_all, client, endpoint, write_r, read_w, notes)
            try:
                yield EofWatch(read_r, eof), write_w
            finally:
                tg.cancel_scope.cancel()
