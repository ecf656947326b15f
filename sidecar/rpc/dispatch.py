"""From a line to its answer: check the envelope, route it, run the handler, answer once.

Rules kept here:
- every request gets exactly one answer, and exceptions become wire errors in one place,
  ``_error_for``: whatever is raised before a handler takes a request over is answered by
  ``on_line``, whatever the handler raises by ``_call`` (internal errors get an ``errorId`` that
  is logged beside the traceback, never the exception's text);
- one task and one cancel scope per request; cheap ``inline`` methods and ``$/`` notifications
  run in the reader, in receive order (a task start costs more than a whole ``ping``).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from anyio.abc import TaskGroup

from ..ndjson import Line
from . import envelope
from .client_requests import CANCEL_METHOD, ClientRequests
from .context import RequestContext
from .envelope import UNSET, decode_cancel, decode_line, is_valid_id, validation_data
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    SERVER_NOT_INITIALIZED,
    RpcError,
    wire_error,
)
from .methods import Method, MethodTable
from .outbox import Message, Outbox

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("sidecar.rpc")

WRITE_GRACE = 10.0  # seconds an answer may wait for a stalled client once its request is over
# Loop turns a big answer gives the reader to take what came in meanwhile, at most: a client that
# never stops sending must not hold the answer back for good.
YIELD_TURNS = 8


class _InFlight:
    __slots__ = ("ctx", "method", "scope", "stop_reason")

    def __init__(self, method: Method, ctx: RequestContext) -> None:
        self.method = method
        self.ctx = ctx
        self.scope = anyio.CancelScope()
        self.stop_reason = "request cancelled by the client"

    def cancel(self) -> None:
        if self.method.cancel == "signal":
            self.ctx.signal_cancel()
        else:
            self.scope.cancel()


class Dispatcher:
    def __init__(
        self,
        connection: Connection,
        methods: MethodTable,
        outbox: Outbox,
        client: ClientRequests,
        init_method: str | None,
        shutdown_method: str | None,
    ) -> None:
        self._connection = connection
        self._methods = methods
        self._outbox = outbox
        self._client = client
        self._init_method = init_method
        self._shutdown_method = shutdown_method
        self.initialized = init_method is None
        self.accepting = True
        self.inflight: dict[int | str, _InFlight] = {}
        self._answered: anyio.Event | None = None  # made when someone waits for answers
        self._tg: TaskGroup | None = None

    def attach(self, tg: TaskGroup) -> None:
        """Requests that need a task of their own run in ``tg``."""
        self._tg = tg

    # ------------------------------------------------------------------ one line in

    async def on_line(self, line: Line) -> None:
        """Route one line; answer it here when no handler will."""
        reply_to: int | str | None = None
        name = "a message"
        try:
            env = decode_line(line)
            if env.method is UNSET and (env.result or env.error is not UNSET):
                self._client.on_response(env)
                return
            request_id: object = env.id
            if request_id is not UNSET:
                if not is_valid_id(request_id):
                    raise RpcError(INVALID_REQUEST, "id must be a string or an integer (not null, bool or float)")
                reply_to = request_id
            if env.jsonrpc != "2.0":
                raise RpcError(INVALID_REQUEST, 'jsonrpc must be "2.0"')
            method: object = env.method
            if method is UNSET:
                raise RpcError(INVALID_REQUEST, "a request needs a method")
            if not isinstance(method, str):
                raise RpcError(INVALID_REQUEST, "method must be a string")
            name = method
            raw = env.params
            if raw and bytes(memoryview(raw)[:1]) != b"{":
                if reply_to is None:
                    log.warning("dropped notification %s: params are not an object", name)
                    return
                if bytes(memoryview(raw)[:1]) == b"[":
                    raise RpcError(
                        INVALID_PARAMS,
                        "params must be an object of named values; positional params (an array) are not supported",
                        {"path": "params", "reason": "expected an object, got an array"},
                    )
                raise RpcError(INVALID_REQUEST, "params must be a JSON object")
            if reply_to is None:
                await self._on_notification(name, raw)
            else:
                await self._on_request(reply_to, name, raw)
        except Exception as exc:  # nothing raises once a handler has the request: one answer each
            await self._outbox.put(self._error_for(reply_to, name, exc))

    async def _on_request(self, request_id: int | str, name: str, raw: bytes) -> None:
        """Raises ``RpcError`` to refuse; once a handler has the request, it answers."""
        if not self.accepting:
            raise RpcError(INVALID_REQUEST, "the server is shutting down and takes no new requests")
        if not self.initialized and name != self._init_method:
            raise RpcError(SERVER_NOT_INITIALIZED, f"send {self._init_method!r} before any other request")
        if request_id in self.inflight:
            raise RpcError(
                INVALID_REQUEST, f"request id {request_id!r} is already in flight; use a new id for each request"
            )
        method = self._methods.get(name)
        if method is None:
            raise RpcError(METHOD_NOT_FOUND, f"method {name!r} not found")
        if method.notification:
            raise RpcError(INVALID_REQUEST, f"{name!r} is a notification: send it without an id")
        params = _decode_params(method, raw)
        if name == self._shutdown_method:
            self.accepting = False  # in receive order: whatever arrives after it is refused
        ctx = RequestContext(self._connection, request_id, name)
        if method.inline:
            await self._outbox.put(await self._call(method, params, ctx))
            ctx.answered()
            return
        assert self._tg is not None, "serve() attaches the task group before reading"
        entry = _InFlight(method, ctx)
        # Named here: anyio would otherwise work a name out of the coroutine for every request.
        self._tg.start_soon(self._run_request, request_id, entry, params, name=name)
        self.inflight[request_id] = entry  # after start_soon: a request it refused is not in flight

    async def _call(self, method: Method, params: Any, ctx: RequestContext) -> Message:
        try:
            result = await method.handler(params, ctx)
            message = envelope.response(ctx.id, result)
        except Exception as exc:
            return self._error_for(ctx.id, method.name, exc)
        if method.name == self._init_method:
            self.initialized = True
        return message

    async def _run_request(self, request_id: int | str, entry: _InFlight, params: Any) -> None:
        message: Message | None = None
        with entry.scope:
            message = await self._call(entry.method, params, entry.ctx)
        if message is None:
            message = envelope.error(request_id, REQUEST_CANCELLED, entry.stop_reason)
        elif isinstance(message, list):
            await self._let_input_first()
        try:
            if not self._outbox.try_put(message):  # the usual case needs no timer
                with anyio.move_on_after(WRITE_GRACE, shield=True):
                    await self._outbox.put(message)
        finally:
            del self.inflight[request_id]  # only now: wait_answered() promises the answer is queued
            if self._answered is not None:
                self._answered.set()
                self._answered = None
        entry.ctx.answered()

    async def _let_input_first(self) -> None:
        """Before a big answer (one in parts) starts: lines that came in while it was made, a
        ``ping`` say, are read and the inline ones answered first. Once the big one is being
        written, whatever comes after waits for it: lines cannot interleave."""
        with anyio.CancelScope(shield=True):
            for _ in range(YIELD_TURNS):
                await anyio.lowlevel.checkpoint()  # the reader, when woken, runs before we go on
                if not self._connection.input_waiting():
                    return

    def _error_for(self, request_id: int | str | None, method: str, exc: Exception) -> bytes:
        """The one place an exception becomes a wire error."""
        wire = wire_error(exc)
        if wire is not None:
            code, message, data = wire
            return envelope.error(request_id, code, message, data)
        error_id = uuid.uuid4().hex[:12]
        log.error("internal error %s while handling %s", error_id, method, exc_info=exc)
        return envelope.error(
            request_id,
            INTERNAL_ERROR,
            f"internal error in {method} (errorId {error_id}); the sidecar log has the details",
            {"errorId": error_id},
        )

    # ------------------------------------------------------------------ notifications

    async def _on_notification(self, name: str, raw: bytes) -> None:
        if name == CANCEL_METHOD:
            self._on_cancel(raw)
            return
        if not self.initialized and name != "exit":
            log.debug("dropped notification %s before initialize", name)
            return
        method = self._methods.get(name)
        if method is None or not method.notification:
            log.info("ignored unknown notification %s", name)
            return
        try:
            params = _decode_params(method, raw)
        except RpcError as exc:
            log.warning("dropped notification %s: %s", name, exc.message)
            return
        ctx = RequestContext(self._connection, None, name)
        if method.inline:
            await self._notify_handler(method, params, ctx)
        else:
            assert self._tg is not None, "serve() attaches the task group before reading"
            self._tg.start_soon(self._notify_handler, method, params, ctx)

    async def _notify_handler(self, method: Method, params: Any, ctx: RequestContext) -> None:
        try:
            await method.handler(params, ctx)
        except Exception:
            log.exception("notification handler %s failed", method.name)

    def _on_cancel(self, raw: bytes) -> None:
        try:
            target = decode_cancel(raw or b"{}").id
        except (msgspec.ValidationError, RecursionError) as exc:
            log.warning("ignored $/cancelRequest: %s", exc)
            return
        entry = self.inflight.get(target)
        if entry is None:
            log.debug("ignored $/cancelRequest for %r: not in flight", target)
            return
        entry.cancel()

    # ------------------------------------------------------------------ stopping

    def cancel_all(self, reason: str, exclude: object) -> None:
        for request_id, entry in self.inflight.items():
            if request_id != exclude:
                entry.stop_reason = reason
                entry.cancel()

    def interrupt_all(self, exclude: object) -> int:
        """Interrupt every request but ``exclude``, whatever its cancel mode; how many there were."""
        left = [entry for request_id, entry in self.inflight.items() if request_id != exclude]
        for entry in left:
            entry.scope.cancel()
        return len(left)

    async def wait_answered(self, exclude: object = None) -> None:
        """Return once every request but ``exclude`` has its answer queued."""
        while any(request_id != exclude for request_id in self.inflight):
            if self._answered is None:
                self._answered = anyio.Event()
            await self._answered.wait()


def _decode_params(method: Method, raw: bytes) -> Any:
    try:
        return method.decode_params(raw or b"{}")
    except msgspec.ValidationError as exc:
        data = validation_data(exc)
        raise RpcError(INVALID_PARAMS, f"invalid params: {data['path']}: {data['reason']}", data) from None
    except RecursionError:
        # The envelope decoded, so the id is known: this request's params are what is too deep.
        data = {"path": "params", "reason": "nested deeper than this parser goes (about 1000 levels)"}
        raise RpcError(INVALID_PARAMS, f"invalid params: {data['reason']}", data) from None
