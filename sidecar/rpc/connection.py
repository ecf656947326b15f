"""One JSON-RPC connection: the reader, the writer and the dispatcher under one task group, and
what its owner does with it (talk to the client, refuse new work, cancel and drain on the way out).

The parts live beside it: ``envelope`` (decoding a line, encoding what we send), ``dispatch``
(routing, running and answering requests), ``outbox`` (the ordered, bounded writer),
``client_requests`` (our requests to the client) and ``context`` (what a handler holds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskStatus

from ..ndjson import LineTooLong
from . import envelope
from .client_requests import ClientRequests
from .dispatch import Dispatcher
from .errors import INVALID_REQUEST, ConnectionClosed
from .methods import MethodTable
from .outbox import Outbox
from .transport import Transport


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
        self.max_line_bytes = max_line_bytes
        self._on_eof = on_eof
        self._closed = anyio.Event()
        self.eof = anyio.Event()
        self._outbox = Outbox(transport, out_queue)
        self._client = ClientRequests(self._outbox)
        self._dispatch = Dispatcher(self, methods, self._outbox, self._client, init_method, shutdown_method)
        self._reader_busy = False  # dispatching lines it has read

    # ------------------------------------------------------------------ state

    @property
    def initialized(self) -> bool:
        """The ``initialize`` request has been answered (or none is required)."""
        return self._dispatch.initialized

    @property
    def accepting(self) -> bool:
        """New requests are still taken (false once ``shutdown`` arrived or ``refuse_requests``)."""
        return self._dispatch.accepting

    @property
    def inflight_count(self) -> int:
        return len(self._dispatch.inflight)

    def input_waiting(self) -> bool:
        """Lines have come in that the reader has not dispatched yet (as far as can be seen now)."""
        return self._reader_busy or self.transport.has_input()

    # ------------------------------------------------------------------ running

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until ``close()``. End of input sets ``eof`` and calls ``on_eof``; the owner decides
        when to stop, so in-flight requests can still be answered during its shutdown."""
        async with anyio.create_task_group() as tg:
            self._dispatch.attach(tg)
            tg.start_soon(self._outbox.run)
            tg.start_soon(self._reader)
            task_status.started()
            await self._closed.wait()
            tg.cancel_scope.cancel()

    async def _reader(self) -> None:
        receive = self.transport.receive
        on_line = self._dispatch.on_line
        while True:
            self._reader_busy = False
            try:
                frames = await receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            self._reader_busy = True
            for frame in frames:
                if isinstance(frame, LineTooLong):
                    await self._outbox.put(envelope.error(
                        None,
                        INVALID_REQUEST,
                        f"message of {frame.size} bytes exceeds the {self.max_line_bytes}-byte "
                        "line limit and was skipped; send smaller messages or raise --max-line-bytes",
                    ))
                else:
                    await on_line(frame)
        self._client.fail_all(ConnectionClosed("the client closed its end before answering"))
        self.eof.set()
        if self._on_eof is not None:
            self._on_eof()

    def close(self) -> None:
        self._closed.set()

    # ------------------------------------------------------------------ stopping

    def refuse_requests(self) -> None:
        """From now on every new request is answered InvalidRequest (the server is going down)."""
        self._dispatch.accepting = False

    async def cancel_inflight(self, reason: str, grace: float, exclude: Any = None) -> int:
        """Stop every running request but ``exclude`` and wait (up to ``grace`` seconds) until each
        has been answered; then interrupt the ones still running (a ``signal`` handler that
        ignored the signal). Returns how many that was."""
        self._dispatch.cancel_all(reason, exclude)
        with anyio.move_on_after(grace, shield=True):
            await self._dispatch.wait_answered(exclude)
        return self._dispatch.interrupt_all(exclude)

    async def wait_idle(self) -> None:
        """Wait until no request is in flight (callers bound this with their own deadline)."""
        await self._dispatch.wait_answered()

    async def flush(self, grace: float) -> None:
        """Write out everything queued (for up to ``grace`` seconds), then stop writing."""
        await self._outbox.close(grace)

    # ------------------------------------------------------------------ talking to the client

    async def notify(self, method: str, params: Any = None) -> None:
        await self._outbox.put(envelope.notification(method, params))

    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any:
        """Ask the client something and wait for its answer (see ``ClientRequests.request``)."""
        return await self._client.request(method, params, result_type)
