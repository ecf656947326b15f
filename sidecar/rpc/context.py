"""What a handler holds while it serves one request: the request's id, the client's wish to
cancel, and the way back to the client (notifications, progress, its own requests)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("sidecar.rpc")

PROGRESS_METHOD = "$/progress"


class RequestContext:
    """What a handler may do with the connection it serves."""

    __slots__ = ("_after", "_cancel_event", "cancel_requested", "connection", "id", "method")

    def __init__(self, connection: Connection, request_id: int | str | None, method: str) -> None:
        self.connection = connection
        self.id = request_id
        self.method = method
        self.cancel_requested = False
        # Both made on first use: most requests (every ``ping``) never need them.
        self._cancel_event: anyio.Event | None = None
        self._after: list[Callable[[], None]] | None = None

    def after_answer(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once this request's answer is queued for writing (e.g. to stop the
        process right after telling the client why)."""
        if self._after is None:
            self._after = []
        self._after.append(callback)

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

    # Called by the dispatcher, not by handlers.

    def signal_cancel(self) -> None:
        """The client asked to cancel a ``signal`` request: the handler winds down on its own."""
        self.cancel_requested = True
        if self._cancel_event is not None:
            self._cancel_event.set()

    def answered(self) -> None:
        """The answer is queued: run the ``after_answer`` callbacks. A failing one is logged, never
        answered: the request has had its answer."""
        for callback in self._after or ():
            try:
                callback()
            except Exception:
                log.exception("an after-answer callback of %s failed", self.method)
