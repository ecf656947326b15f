"""The scheduler's sense of time: wall-clock ``now`` and a wait that ends at a wall-clock time.

Waiting is done in naps of at most ``MAX_NAP`` seconds with the wall clock read after each: the
event loop's sleep runs on the monotonic clock, which stands still while a laptop is suspended,
so one long sleep would wake late by the whole suspension. A nap ends early when the scheduler
is woken (a schedule changed, tools were switched back on). Tests hand the service a clock of
their own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

import anyio

MAX_NAP = 30.0  # seconds: the most a run can be late after the machine resumes from suspend


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    async def wait(self, until: datetime | None, wake: anyio.Event) -> None:
        """Return at ``until`` (None: only when woken), when ``wake`` is set, or after a nap;
        the caller looks at ``now()`` again either way."""
        ...


class WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def wait(self, until: datetime | None, wake: anyio.Event) -> None:
        nap = MAX_NAP if until is None else min(MAX_NAP, (until - self.now()).total_seconds())
        if nap <= 0:
            return
        with anyio.move_on_after(nap):
            await wake.wait()
