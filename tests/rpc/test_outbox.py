"""The outbox: order is kept whether a message is written at once, queued, or refused for now."""

from __future__ import annotations

import anyio
import pytest

from sidecar.rpc import memory_pair
from sidecar.rpc.outbox import Outbox

pytestmark = pytest.mark.anyio


async def test_try_put_takes_what_fits_and_refuses_without_waiting_when_full() -> None:
    ours, theirs = memory_pair(buffer=1)
    outbox = Outbox(ours, 1)
    assert outbox.try_put(b"1\n")  # written at once (the pipe has room for one)
    assert outbox.try_put(b"2\n")  # the pipe is full: queued for the writer
    assert not outbox.try_put(b"3\n")  # the queue is full too: refused, nothing taken
    got: list[bytes] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await outbox.put(b"3\n")  # waits for room, then goes after the others
        while len(got) < 3:
            got.extend(await theirs.receive())
        await outbox.close(1)
    assert got == [b"1", b"2", b"3"]
