"""A server's log messages (MCP ``notifications/message``) on their way to the UI: filtered by the
level set for the server, masked, bounded in size, and rate-limited so that a server logging a
thousand lines a second cannot flood the UI (what is dropped is counted, and the next message
that passes says how many were).

Cheap to import (no SDK).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, get_args

import anyio

from ..api.mcp import LogLevel
from ..secrets import mask_json

LEVELS: tuple[str, ...] = get_args(LogLevel)
log = logging.getLogger("sidecar.mcp_host")

RATE = 20.0
"""Messages a second a server may send on to the UI, over time."""
BURST = 100
"""Messages a server may send on at once after a quiet spell."""
MAX_DATA_CHARS = 8192
"""The most of one message's data the UI is given (the rest is cut, and says so)."""
QUIET = 1.0
"""Seconds without a drop after which the UI is told a count that no passing message carried."""


@dataclass(frozen=True)
class ServerLog:
    server: str  # the server key
    level: LogLevel
    logger: str | None
    data: Any
    dropped: int  # messages of this server dropped since the last one passed on


OnLog = Callable[[ServerLog], Awaitable[None]]


def at_least(level: str, floor: str | None) -> bool:
    """Whether a message at ``level`` is wanted when the server's level is ``floor`` (None: all)."""
    if floor is None or floor not in LEVELS:
        return True
    return (LEVELS.index(level) if level in LEVELS else len(LEVELS)) >= LEVELS.index(floor)


def bounded(data: Any) -> Any:
    """The data as the UI gets it: secrets masked, at most ``MAX_DATA_CHARS`` of it."""
    data = mask_json(data)
    text = data if isinstance(data, str) else None
    if text is None:
        try:
            encoded = json.dumps(data, ensure_ascii=False)
        except (TypeError, ValueError):
            return str(data)[:MAX_DATA_CHARS]
        if len(encoded) <= MAX_DATA_CHARS:
            return data
        text = encoded
    if len(text) <= MAX_DATA_CHARS:
        return text
    return f"{text[:MAX_DATA_CHARS]}… [{len(text)} characters in all]"


class LogGate:
    """A token bucket per server: ``BURST`` at once, ``RATE`` a second over time."""

    def __init__(self, rate: float = RATE, burst: int = BURST, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self.dropped = 0
        self.ever_dropped = 0
        self.dropping = anyio.Event()
        """Set when a message is dropped and no count has been told since."""

    def admit(self) -> int | None:
        """None when this message is dropped; else how many were dropped before it."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens < 1:
            self.dropped += 1
            self.ever_dropped += 1
            self.dropping.set()
            return None
        self._tokens -= 1
        return self.take()

    def take(self) -> int:
        """The count of dropped messages not told yet (zeroed)."""
        dropped, self.dropped = self.dropped, 0
        if self.dropping.is_set():
            self.dropping = anyio.Event()
        return dropped


def dropped_note(server: str, dropped: int) -> ServerLog:
    """What the UI is told when a flood ended with no message passing after it."""
    return ServerLog(server, "warning", None, f"{dropped} log messages of this server were dropped: it logged "
                     f"faster than {RATE:g} a second", dropped)


async def tell_drops(gate: LogGate, server: str, on_log: OnLog) -> None:
    """Runs while a server is connected: a count that no passing message carried is told on its own."""
    while True:
        await gate.dropping.wait()
        while True:  # until the flood is over
            seen = gate.ever_dropped
            await anyio.sleep(QUIET)
            if gate.ever_dropped == seen:
                break
        dropped = gate.take()
        if not dropped:
            continue
        try:
            await on_log(dropped_note(server, dropped))
        except Exception:  # the UI's side failing must not end the server's connection
            log.exception("on_log callback failed for %s", server)
