"""One JSON-RPC connection: read, dispatch, answer, and talk back to the client.

Rules this module keeps:
- every request gets exactly one answer, and this is the one place where exceptions become wire
  errors (internal ones get an ``errorId`` that is logged beside the traceback);
- one task and one cancel scope per request; cheap ``inline`` methods and ``$/`` notifications run
  in the reader in receive order;
- one writer task drains a bounded queue and joins what is waiting into one write, so a slow
  client slows producers instead of growing memory;
- server-to-client requests get their own ids (``s1``, ``s2``, ...); abandoning one tells the client.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    SERVER_NOT_INITIALIZED,
    ConnectionClosed,
    RemoteError,
    RpcError,
    wire_error,
)
from .framing import LineTooLong
from .methods import Method, MethodTable
from .transport import Transport

log = logging.getLogger("sidecar.rpc")

CANCEL_METHOD = "$/cancelRequest"
PROGRESS_METHOD = "$/progress"
WRITE_GRACE = 10.0  # seconds an answer may wait for a stalled client once its request is over

_UNSET = msgspec.UNSET
_encode = msgspec.json.Encoder().encode


class _Envelope(msgspec.Struct):
    # Loosely typed on purpose: a bad id or version must still let us answer with the right code
    # (and with the id, when it is usable), which a strict decode would not.
    jsonrpc: Any = _UNSET
    id: Any = _UNSET
    method: Any = _UNSET
    params: msgspec.Raw = msgspec.Raw()
    result: msgspec.Raw = msgspec.Raw()
    error: Any = _UNSET


class _ErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Any = None


class _CancelParams(msgspec.Struct):
    id: int | str


_decode_envelope = msgspec.json.Decoder(_Envelope).decode
_decode_cancel = msgspec.json.Decoder(_CancelParams).decode


def _valid_id(value: Any) -> bool:
    t = type(value)
    return t is int or t is str


def _validation_data(exc: msgspec.ValidationError) -> dict[str, str]:
    text = str(exc)
    reason, sep, where = text.rpartition(" - at `")
    if not sep:
        return {"path": "params", "reason": text}
    path = where.rstrip("`")
    return {"path": "params" + path[1:], "reason": reason}


class RequestContext:
    """What a handler may do with the connection it serves."""

    __slots__ = ("_after", "_cancel_event", "cancel_requested", "connection", "id", "method")

    def __init__(self, connection: Connection, request_id: int | str | None, method: str) -> None:
        self.connection = connection
        self.id = request_id
        self.method = method
        self.cancel_requested = False
        self._cancel_event: anyio.Event | None = None
        self._after: list[Callable[[], None]] | None = None

    def after_answer(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once this request's answer is queued for writing (e.g. to stop the
        process right after telling the client why)."""
        if self._after is None:
            self._after = []
        self._after.append(callback)

    def _answered(self) -> None:
        for callback in self._after or ():
            callback()

    async def notify(self, method: str, params: Any = None) -> None:
        await self.connection.notify(method, params)

    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any:
        return await self.connection.request(method, params, result_type)

    async def progress(self, token: int | str, value: Any) -> None:
        await self.connection.notify(PROGRESS_METHOD, {"token": token, "value": value})

    async def wait_cancel_requested(self) -> None:
        """For ``signal`` handlers: returns once the client asked to cancel."""
        if self.cancel_requested:
            return
        if self._cancel_event is None:
            self._cancel_event = anyio.Event()
        await self._cancel_event.wait()

    def _request_cancel(self) -> None:
        self.cancel_requested = True
        if self._cancel_event is not None:
            self._cancel_event.set()


class _InFlight:
    __slots__ = ("ctx", "method", "scope", "stop_reason")

    def __init__(self, method: Method, ctx: RequestContext) -> None:
        self.method = method
        self.ctx = ctx
        self.scope = anyio.CancelScope()
        self.stop_reason = "request cancelled by the client"


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: bytes | None = None
        self.error: RpcError | None = None


class Connection:
    def __init__(
        self,
        transport: Transport,
        methods: MethodTable,
        *,
        init_method: str | None = "initialize",
        shutdown_method: str | None = "shutdown",
        max_line_bytes: int = 64 << 20,
        out_queue: int = 256,
        on_eof: Callable[[], None] | None = None,
    ) -> None:
        self.transport = transport
        self.methods = methods
        self.max_line_bytes = max_line_bytes
        self._init_method = init_method
        self._shutdown_method = shutdown_method
        self.initialized = init_method is None
        self.accepting = True
        self._on_eof = on_eof
        self._inflight: dict[int | str, _InFlight] = {}
        self._pending: dict[str, _Pending] = {}
        self._next_server_id = 0
        self._tg: TaskGroup | None = None
        self._closed = anyio.Event()
        self.eof = anyio.Event()
        self._out_broken = False
        send, recv = anyio.create_memory_object_stream[bytes](out_queue)
        self._out: MemoryObjectSendStream[bytes] = send
        self._out_recv: MemoryObjectReceiveStream[bytes] = recv
        self._writer_done = anyio.Event()
        self._queued = 0  # messages handed to the writer task and not yet written
        self._out_closed = False

    # ------------------------------------------------------------------ running

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED):
        """Run until ``close()``. End of input sets ``eof`` and calls ``on_eof``; the owner decides
        when to stop, so in-flight requests can still be answered during its shutdown."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._writer)
            tg.start_soon(self._reader)
            task_status.started()
            await self._closed.wait()
            tg.cancel_scope.cancel()

    async def _reader(self) -> None:
        await self._read_loop()
        self._fail_pending(ConnectionClosed("the client closed its end before answering"))
        self.eof.set()
        if self._on_eof is not None:
            self._on_eof()

    def close(self) -> None:
        self._closed.set()

    @property
    def inflight_count(self) -> int:
        return len(self._inflight)

    def refuse_requests(self) -> None:
        """From now on every new request is answered InvalidRequest (the server is going down)."""
        self.accepting = False

    async def cancel_inflight(self, reason: str, timeout: float, exclude: Any = None) -> int:
        """Stop every running request but ``exclude`` and wait (up to ``timeout``) until each has
        been answered. Returns how many were still unanswered at the deadline."""
        for request_id, entry in list(self._inflight.items()):
            if request_id == exclude:
                continue
            entry.stop_reason = reason
            if entry.method.cancel == "signal":
                entry.ctx._request_cancel()
            else:
                entry.scope.cancel()
        with anyio.move_on_after(timeout, shield=True):
            while any(rid != exclude for rid in self._inflight):
                await anyio.sleep(0.005)
        left = [rid for rid in self._inflight if rid != exclude]
        for rid in left:  # a signal handler that ignored the signal: interrupt it now
            self._inflight[rid].scope.cancel()
        return len(left)

    async def wait_idle(self) -> None:
        """Wait until no request is in flight (callers bound this with their own deadline)."""
        while self._inflight:
            await anyio.sleep(0.002)

    async def flush(self, timeout: float) -> None:
        """Write out everything queued (bounded by ``timeout``), then stop writing."""
        self._out_closed = True
        self._out.close()
        with anyio.move_on_after(timeout, shield=True):
            await self._writer_done.wait()

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        receive = self.transport.receive
        while True:
            try:
                frames = await receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            for frame in frames:
                if type(frame) is LineTooLong:
                    await self._send_error(
                        None,
                        INVALID_REQUEST,
                        f"message of {frame.size} bytes exceeds the {self.max_line_bytes}-byte "
                        "line limit and was skipped; send smaller messages or raise --max-line-bytes",
                    )
                else:
                    try:
                        await self._dispatch(frame)
                    except Exception:  # one bad line must never take the reader down
                        log.exception("failed to dispatch a message: %.200r", frame)

    async def _dispatch(self, line: bytes) -> None:
        try:
            env = _decode_envelope(line)
        except msgspec.ValidationError:
            if line.lstrip()[:1] == b"[":
                msg = "batch requests are not supported: send one JSON object per line"
            else:
                msg = "a JSON-RPC message must be a JSON object"
            await self._send_error(None, INVALID_REQUEST, msg)
            return
        except msgspec.DecodeError as exc:
            await self._send_error(None, PARSE_ERROR, f"parse error: {exc}")
            return

        request_id = env.id
        if env.method is _UNSET and (env.result or env.error is not _UNSET):
            self._on_response(request_id, env)  # never answered, whatever its id: no ping-pong
            return
        has_id = request_id is not _UNSET
        id_ok = _valid_id(request_id)
        if has_id and not id_ok:
            await self._send_error(
                None, INVALID_REQUEST, "id must be a string or an integer (not null, bool or float)"
            )
            return
        answer_id = request_id if id_ok else None
        if env.jsonrpc != "2.0":
            await self._send_error(answer_id, INVALID_REQUEST, 'jsonrpc must be "2.0"')
            return
        method = env.method
        if method is _UNSET:
            await self._send_error(answer_id, INVALID_REQUEST, "a request needs a method")
            return
        if type(method) is not str:
            await self._send_error(answer_id, INVALID_REQUEST, "method must be a string")
            return
        raw = env.params
        if raw:
            first = bytes(memoryview(raw)[:1])
            if first != b"{":
                if has_id:
                    if first == b"[":
                        await self._send_error(
                            request_id,
                            INVALID_PARAMS,
                            "params must be an object of named values; positional params "
                            "(an array) are not supported",
                            {"path": "params", "reason": "expected an object, got an array"},
                        )
                    else:
                        await self._send_error(
                            request_id, INVALID_REQUEST, "params must be a JSON object"
                        )
                else:
                    log.warning("dropped notification %s: params are not an object", method)
                return
        if has_id:
            await self._on_request(request_id, method, raw)
        else:
            await self._on_notification(method, raw)

    async def _on_request(self, request_id: int | str, name: str, raw: bytes) -> None:
        if not self.accepting:
            await self._send_error(
                request_id, INVALID_REQUEST, "the server is shutting down and takes no new requests"
            )
            return
        if not self.initialized and name != self._init_method:
            await self._send_error(
                request_id,
                SERVER_NOT_INITIALIZED,
                f"send {self._init_method!r} before any other request",
            )
            return
        if request_id in self._inflight:
            await self._send_error(
                request_id,
                INVALID_REQUEST,
                f"request id {request_id!r} is already in flight; use a new id for each request",
            )
            return
        method = self.methods.get(name)
        if method is None:
            await self._send_error(request_id, METHOD_NOT_FOUND, f"method {name!r} not found")
            return
        if method.notification:
            await self._send_error(
                request_id, INVALID_REQUEST, f"{name!r} is a notification: send it without an id"
            )
            return
        try:
            params = method.decode_params(raw or b"{}")
        except msgspec.ValidationError as exc:
            data = _validation_data(exc)
            await self._send_error(
                request_id, INVALID_PARAMS, f"invalid params: {data['path']}: {data['reason']}", data
            )
            return
        if name == self._shutdown_method:
            self.accepting = False  # in receive order: whatever arrives after it is refused
        ctx = RequestContext(self, request_id, name)
        if method.inline:
            await self._write(await self._call(method, params, ctx))
            ctx._answered()
            return
        entry = _InFlight(method, ctx)
        self._inflight[request_id] = entry
        assert self._tg is not None
        self._tg.start_soon(self._run_request, entry, params)

    async def _call(self, method: Method, params: Any, ctx: RequestContext) -> bytes:
        try:
            result = await method.handler(params, ctx)
            message = _response(ctx.id, _encode(result))
        except Exception as exc:
            return self._error_for(ctx.id, method.name, exc)
        if method.name == self._init_method:
            self.initialized = True
        return message

    async def _run_request(self, entry: _InFlight, params: Any) -> None:
        message: bytes | None = None
        with entry.scope:
            message = await self._call(entry.method, params, entry.ctx)
        if message is None:
            message = _error(entry.ctx.id, REQUEST_CANCELLED, entry.stop_reason)
        try:
            with anyio.move_on_after(WRITE_GRACE, shield=True):
                await self._write(message)
        finally:
            del self._inflight[entry.ctx.id]  # only now: wait_idle() promises the answer is queued
        entry.ctx._answered()

    async def _on_notification(self, name: str, raw: bytes) -> None:
        if name == CANCEL_METHOD:
            self._on_cancel(raw)
            return
        if not self.initialized and name != "exit":
            log.debug("dropped notification %s before initialize", name)
            return
        method = self.methods.get(name)
        if method is None or not method.notification:
            log.info("ignored unknown notification %s", name)
            return
        try:
            params = method.decode_params(raw or b"{}")
        except msgspec.ValidationError as exc:
            log.warning("dropped notification %s: %s", name, exc)
            return
        ctx = RequestContext(self, None, name)
        if method.inline:
            await self._notify_handler(method, params, ctx)
        else:
            assert self._tg is not None
            self._tg.start_soon(self._notify_handler, method, params, ctx)

    async def _notify_handler(self, method: Method, params: Any, ctx: RequestContext) -> None:
        try:
            await method.handler(params, ctx)
        except Exception:
            log.exception("notification handler %s failed", method.name)

    def _on_cancel(self, raw: bytes) -> None:
        try:
            target = _decode_cancel(raw or b"{}").id
        except msgspec.ValidationError as exc:
            log.warning("ignored $/cancelRequest: %s", exc)
            return
        entry = self._inflight.get(target)
        if entry is None:
            log.debug("ignored $/cancelRequest for %r: not in flight", target)
            return
        if entry.method.cancel == "signal":
            entry.ctx._request_cancel()
        else:
            entry.scope.cancel()

    def _on_response(self, request_id: Any, env: _Envelope) -> None:
        pending = self._pending.get(request_id) if type(request_id) is str else None
        if pending is None:
            log.warning("ignored a response to unknown request id %r", request_id)
            return
        if env.error is not _UNSET:
            try:
                err = msgspec.convert(env.error, _ErrorObject)
                pending.error = RemoteError(err.code, err.message, err.data)
            except msgspec.ValidationError:
                pending.error = RemoteError(INTERNAL_ERROR, f"malformed error object: {env.error!r}")
        else:
            pending.result = bytes(env.result)
        pending.done.set()

    # ------------------------------------------------------------------ talking to the client

    async def notify(self, method: str, params: Any = None) -> None:
        if params is None:
            await self._write(b'{"jsonrpc":"2.0","method":%s}\n' % _encode(method))
        else:
            await self._write(
                b'{"jsonrpc":"2.0","method":%s,"params":%s}\n' % (_encode(method), _encode(params))
            )

    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any:
        """Ask the client something and wait for its answer.

        Raises ``RemoteError`` when it answers with an error and ``ConnectionClosed`` when it goes
        away; cancelling the caller sends ``$/cancelRequest`` for the abandoned id.
        """
        if self.eof.is_set():
            raise ConnectionClosed()
        self._next_server_id += 1
        server_id = f"s{self._next_server_id}"
        pending = _Pending()
        self._pending[server_id] = pending
        body = b"" if params is None else b',"params":%s' % _encode(params)
        try:
            await self._write(
                b'{"jsonrpc":"2.0","id":%s,"method":%s%s}\n'
                % (_encode(server_id), _encode(method), body)
            )
            await pending.done.wait()
        except BaseException:
            if not pending.done.is_set() and not self.eof.is_set():
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await self.notify(CANCEL_METHOD, {"id": server_id})
            raise
        finally:
            self._pending.pop(server_id, None)
        if pending.error is not None:
            raise pending.error
        try:
            return msgspec.json.decode(pending.result or b"null", type=result_type)
        except msgspec.ValidationError as exc:
            raise RemoteError(
                INVALID_PARAMS, f"the client's answer to {method} is invalid: {exc}"
            ) from None

    def _fail_pending(self, error: RpcError) -> None:
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = error
                pending.done.set()

    # ------------------------------------------------------------------ writing

    def _error_for(self, request_id: Any, method: str, exc: Exception) -> bytes:
        wire = wire_error(exc)
        if wire is not None:
            code, message, data = wire
            return _error(request_id, code, message, data)
        error_id = uuid.uuid4().hex[:12]
        log.error("internal error %s while handling %s", error_id, method, exc_info=exc)
        return _error(
            request_id,
            INTERNAL_ERROR,
            f"internal error in {method} (errorId {error_id}); the sidecar log has the details",
            {"errorId": error_id},
        )

    async def _send_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        await self._write(_error(request_id, code, message, data))

    async def _write(self, message: bytes) -> None:
        if self._out_broken:
            return
        if not self._queued and not self._out_closed:
            # Nothing waits to go out before it: write now, without a hop to the writer task.
            try:
                sent = self.transport.try_send(message)
            except (anyio.BrokenResourceError, OSError) as exc:
                log.warning("the client stopped reading our output: %s", exc)
                self._out_broken = True
                return
            if sent == len(message):
                return
            message = message[sent:]  # the rest goes first: the queue is empty
        try:
            self._queued += 1
            await self._out.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._queued -= 1
            log.debug("dropped a message written after the writer closed")

    async def _writer(self) -> None:
        send = self.transport.send
        receive_nowait = self._out_recv.receive_nowait
        try:
            async for first in self._out_recv:
                if self._out_broken:
                    self._queued -= 1
                    continue  # keep draining so producers never block on a dead client
                batch = [first]
                while len(batch) < 1024:
                    try:
                        batch.append(receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                try:
                    await send(b"".join(batch) if len(batch) > 1 else first)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    log.warning("the client stopped reading our output: %s", exc)
                    self._out_broken = True
                finally:
                    self._queued -= len(batch)
        finally:
            self._writer_done.set()


def _response(request_id: Any, result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":%s,"result":%s}\n' % (_encode(request_id), result)


def _error(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return b'{"jsonrpc":"2.0","id":%s,"error":%s}\n' % (_encode(request_id), _encode(err))
