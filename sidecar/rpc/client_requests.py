"""Requests we send to the client (``ui/...``) and the answers it sends back.

Their ids are ours (``s1``, ``s2``, ...), so they never collide with the client's. Abandoning one
tells the client with ``$/cancelRequest``; the end of input fails every one still waiting.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import msgspec

from . import envelope
from .envelope import Envelope, ErrorObject
from .errors import INTERNAL_ERROR, INVALID_PARAMS, ConnectionClosed, InvalidResponse, RemoteError, RpcError
from .outbox import Outbox

log = logging.getLogger("sidecar.rpc")

CANCEL_METHOD = "$/cancelRequest"
CANCEL_GRACE = 1.0  # seconds to tell the client we gave up on a request


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: bytes | None = None
        self.error: RpcError | None = None


class ClientRequests:
    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._pending: dict[str, _Pending] = {}
        self._last_id = 0
        self._gone: RpcError | None = None  # set once the client can no longer answer

    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any:
        """Ask the client something and wait for its answer, decoded as ``result_type``.

        Raises ``RemoteError`` when it answers with an error and ``ConnectionClosed`` when it goes
        away; cancelling the caller sends ``$/cancelRequest`` for the abandoned id.
        """
        if self._gone is not None:
            raise ConnectionClosed()
        self._last_id += 1
        server_id = f"s{self._last_id}"
        pending = _Pending()
        self._pending[server_id] = pending
        try:
            await self._outbox.put(envelope.request(server_id, method, params))
            await pending.done.wait()
        except BaseException:
            if not pending.done.is_set() and self._gone is None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE):
                    await self._outbox.put(envelope.notification(CANCEL_METHOD, {"id": server_id}))
            raise
        finally:
            self._pending.pop(server_id, None)
        if pending.error is not None:
            raise pending.error
        try:
            return msgspec.json.decode(pending.result or b"null", type=result_type)
        except msgspec.ValidationError as exc:
            raise InvalidResponse(INVALID_PARAMS, f"the client's answer to {method} is invalid: {exc}") from None

    def on_response(self, env: Envelope) -> None:
        """A response from the client. Never answered, whatever it holds: no ping-pong."""
        request_id: object = env.id
        pending = self._pending.get(request_id) if isinstance(request_id, str) else None
        if pending is None:
            log.warning("ignored a response to unknown request id %r", request_id)
            return
        if env.error is not envelope.UNSET:
            try:
                err = msgspec.convert(env.error, ErrorObject)
                pending.error = RemoteError(err.code, err.message, err.data)
            except msgspec.ValidationError:
                pending.error = RemoteError(INTERNAL_ERROR, f"malformed error object: {env.error!r}")
        else:
            pending.result = bytes(env.result)
        pending.done.set()

    def fail_all(self, error: RpcError) -> None:
        """The client is gone: every waiting request fails with ``error``, and so will new ones."""
        self._gone = error
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = error
                pending.done.set()
