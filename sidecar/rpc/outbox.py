"""Everything we send, in order, through one writer.

A message goes out with a non-blocking write when nothing is queued ahead of it (no hop to another
task for the common case). Otherwise it joins a bounded queue that one writer task drains, joining
what waits into one write: order holds, and a slow client slows producers instead of growing
memory. Once the client stops reading, everything is dropped so producers never block on it.
"""

from __future__ import annotations

import logging

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .transport import Transport

log = logging.getLogger("sidecar.rpc")

MAX_JOINED = 1024  # messages joined into one write at most


class Outbox:
    def __init__(self, transport: Transport, size: int) -> None:
        self._transport = transport
        send, recv = anyio.create_memory_object_stream[bytes](size)
        self._send: MemoryObjectSendStream[bytes] = send
        self._recv: MemoryObjectReceiveStream[bytes] = recv
        self._queued = 0  # messages handed to the writer task and not yet written
        self._closed = False
        self._broken = False
        self._drained = anyio.Event()

    async def put(self, message: bytes) -> None:
        """Send ``message`` after everything put before it. Never raises: a message put after
        ``close`` or once the client is gone is dropped (and logged)."""
        if self._broken:
            return
        if not self._queued and not self._closed:
            try:
                sent = self._transport.try_send(message)
            except (anyio.BrokenResourceError, OSError) as exc:
                self._lost(exc)
                return
            if sent == len(message):
                return
            message = message[sent:]  # the rest goes first: the queue is empty
        try:
            self._queued += 1
            await self._send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._queued -= 1
            log.debug("dropped a message written after the writer closed")

    async def run(self) -> None:
        """The writer task: runs until ``close`` and the queue is drained."""
        send = self._transport.send
        receive_nowait = self._recv.receive_nowait
        try:
            async for first in self._recv:
                if self._broken:
                    self._queued -= 1
                    continue  # keep draining so producers never block on a dead client
                batch = [first]
                while len(batch) < MAX_JOINED:
                    try:
                        batch.append(receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                try:
                    await send(b"".join(batch) if len(batch) > 1 else first)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._lost(exc)
                finally:
                    self._queued -= len(batch)
        finally:
            self._drained.set()

    async def close(self, grace: float) -> None:
        """Take nothing more, and wait (up to ``grace`` seconds) until what is queued is written."""
        self._closed = True
        self._send.close()
        with anyio.move_on_after(grace, shield=True):
            await self._drained.wait()

    def _lost(self, exc: BaseException) -> None:
        log.warning("the client stopped reading our output: %s", exc)
        self._broken = True
