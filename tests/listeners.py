"""A local TCP port that records what reaches it: the target a sandboxed tool must not connect to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc


@asynccontextmanager
async def recording_listener() -> AsyncIterator[tuple[int, list[bytes]]]:
    """``(port, accepted)`` on 127.0.0.1: ``accepted`` gets the first bytes of each connection."""
    accepted: list[bytes] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            accepted.append(await stream.receive())

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield port, accepted
        tg.cancel_scope.cancel()
