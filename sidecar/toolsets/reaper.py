"""The reaper: toolsets soft-deleted longer than the retention are removed for good (seed 002:
"background task reaps after 2 days"), once at start and then periodically, as
toolsets/uninstall removes them. It runs as a task on the event loop: every step it takes is a
database await or a file removal in a worker thread, so nothing it does holds the loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from ..store.rows import stamp_of
from .service import ToolsetService

log = logging.getLogger("sidecar.toolsets.reaper")

# How often it looks again, at most: a retention of days needs no minute-by-minute check.
MAX_INTERVAL = 3600.0


class Reaper:
    def __init__(self, toolsets: ToolsetService, retention: float, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.toolsets = toolsets
        self.retention = retention  # seconds a toolset stays soft-deleted before it is removed
        self.clock = clock
        self._scope = anyio.CancelScope()

    @property
    def interval(self) -> float:
        """Seconds between passes: often enough that a toolset is removed within about half the
        retention after it is due."""
        return min(MAX_INTERVAL, max(0.5, self.retention / 2))

    async def run(self) -> None:
        with self._scope:
            while True:
                try:
                    await self.reap()
                except Exception:  # one bad pass (a locked database) must not end the reaping
                    log.exception("reaping soft-deleted toolsets failed; trying again in %.0fs", self.interval)
                await anyio.sleep(self.interval)

    async def reap(self) -> list[str]:
        """Remove every toolset deleted longer than the retention; returns their ids."""
        cutoff = stamp_of(self.clock() - self.retention)
        removed: list[str] = []
        for t in await self.toolsets.deleted_before(cutoff):
            # Restored (or removed) meanwhile: uninstall checks again under its lock.
            if await self.toolsets.uninstall(t.id, deleted_before=cutoff):
                log.info("removed toolset %s (%s): soft-deleted at %s, longer ago than the retention of %s",
                         t.id, t.name, t.soft_deleted_at, _duration(self.retention))
                removed.append(t.id)
        return removed

    async def aclose(self) -> None:
        self._scope.cancel()


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
