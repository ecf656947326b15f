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

from .transport import Data, Transport

log = logging.getLogger("sidecar.rpc")

MAX_JOINED = 1024  # messages joined into one write at most
JOIN_BYTES = 1 << 16  # a bigger message is written on its own: joining would copy it whole


class Outbox:
    def __init__(self, transport: Transport, size: int) -> None:
        self._transport = transport
        send, recv = anyio.create_memory_object_stream[Data](size)
        self._send: MemoryObjectSendStream[Data] = send
        self._recv: MemoryObjectReceiveStream[Data] = recv
        self._queued = 0  # messages handed to the writer task and not yet written
        self._closed = False
        self._broken = False
        self._drained = anyio.Event()

    async def put(self, message: Data) -> None:
        """Send ``message`` after everything put before it. Never raises: a message put after
        ``close`` or once the client is gone is dropped (and logged)."""
        rest = self._put_now(message)
        if rest is None:
            return
        try:
            self._queued += 1
            await self._send.send(rest)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._queued -= 1
            log.debug("dropped a message written after the writer closed")

    def try_put(self, message: Data) -> bool:
        """``put`` without waiting: True once the message is written, queued or dropped as
        ``put`` would; False when the queue is full and nothing was taken (then ``put``)."""
        rest = message if self._queued and not self._broken else self._put_now(message)
        if rest is None:
            return True
        try:
            self._send.send_nowait(rest)
        except anyio.WouldBlock:
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropped a message written after the writer closed")
            return True
        self._queued += 1
        return True

    def _put_now(self, message: Data) -> Data | None:
        """Write what can go out at once; what is left to queue (None: nothing, or dropped)."""
        if self._broken:
            return None
        if not self._queued and not self._closed:
            try:
                sent = self._transport.try_send(message)
            except (anyio.BrokenResourceError, OSError) as exc:
                self._lost(exc)
                return None
            if sent == len(message):
                return None
            return memoryview(message)[sent:]  # the rest goes first (a view: no copy of a big one)
        return message

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
                size = len(first)
                # Join what waits into one write, but never copy a big message to do it.
                while len(batch) < MAX_JOINED and size <= JOIN_BYTES:
                    try:
                        batch.append(receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                    size += len(batch[-1])
                try:
                    if size <= JOIN_BYTES or len(batch) == 1:
                        await send(b"".join(batch) if len(batch) > 1 else first)
                    else:  # only the last one took it over the limit
                        await send(b"".join(batch[:-1]) if len(batch) > 2 else first)
                        await send(batch[-1])
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
