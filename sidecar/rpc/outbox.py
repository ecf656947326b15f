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

from .envelope import Parts
from .transport import Data, Transport

log = logging.getLogger("sidecar.rpc")

MAX_JOINED = 1024  # messages joined into one write at most
JOIN_BYTES = 1 << 16  # a bigger message is written on its own: joining would copy it whole

# One message: bytes, or one line in parts (a big result kept apart from its envelope), always
# written back to back so nothing lands inside the line.
Message = Data | Parts


def _size(message: Message) -> int:
    return sum(len(p) for p in message) if isinstance(message, list) else len(message)


class Outbox:
    def __init__(self, transport: Transport, size: int) -> None:
        self._transport = transport
        send, recv = anyio.create_memory_object_stream[Message](size)
        self._send: MemoryObjectSendStream[Message] = send
        self._recv: MemoryObjectReceiveStream[Message] = recv
        self._queued = 0  # messages handed to the writer task and not yet written
        self._closed = False
        self._broken = False
        self._drained = anyio.Event()

    async def put(self, message: Message) -> None:
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

    def try_put(self, message: Message) -> bool:
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

    def _put_now(self, message: Message) -> Message | None:
        """Write what can go out at once; what is left to queue (None: nothing, or dropped)."""
        if self._broken:
            return None
        if self._queued or self._closed:
            return message
        parts = message if isinstance(message, list) else [message]
        for i, part in enumerate(parts):
            try:
                sent = self._transport.try_send(part)
            except (anyio.BrokenResourceError, OSError) as exc:
                self._lost(exc)
                return None
            if sent < len(part):
                # The rest goes first, as views: no copy of a big one.
                rest: Parts = [memoryview(part)[sent:], *parts[i + 1:]]
                return rest if len(rest) > 1 else rest[0]
        return None

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
                size = _size(first)
                # Join what waits into one write, but never copy a big message to do it (a
                # message in parts is always a big one).
                while len(batch) < MAX_JOINED and size <= JOIN_BYTES:
                    try:
                        batch.append(receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                    size += _size(batch[-1])
                try:
                    if len(batch) == 1:
                        await self._write(first)
                    elif size <= JOIN_BYTES:
                        await send(_join(batch))
                    else:  # only the last one took it over the limit
                        await send(_join(batch[:-1]))
                        await self._write(batch[-1])
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._lost(exc)
                finally:
                    self._queued -= len(batch)
        finally:
            self._drained.set()

    async def _write(self, message: Message) -> None:
        for part in message if isinstance(message, list) else (message,):
            await self._transport.send(part)

    async def close(self, grace: float) -> None:
        """Take nothing more, and wait (up to ``grace`` seconds) until what is queued is written."""
        self._closed = True
        self._send.close()
        with anyio.move_on_after(grace, shield=True):
            await self._drained.wait()

    def _lost(self, exc: BaseException) -> None:
        log.warning("the client stopped reading our output: %s", exc)
        self._broken = True


def _join(batch: list[Message]) -> Data:
    if len(batch) == 1 and not isinstance(batch[0], list):
        return batch[0]
    return b"".join(p for m in batch for p in (m if isinstance(m, list) else (m,)))
