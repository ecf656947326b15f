"""The kill switch (seed 004 "Safety Guardrails": ``tools_enabled: false`` disables all tools).

Off, no tool call starts, whoever asks (``tools/call``, the "+" palette, a model in a chat turn,
a schedule): ``check`` raises ``ToolsSwitchedOff`` before any lock, worker or record. The calls
running when it goes off are stopped at once: each ran its tool inside ``run``, whose cancel
scope the switch cancels, and ends as an error record with ``error_kind`` ``"killed"`` (its
workspace snapshot and record are still written; a chat turn goes on, without tools).

The setting is stored (``store/settings.py``) and read once at start, so ``enabled`` costs no
I/O on the path of every call. ``on_change`` is how the rest learns of a change (the UI's
``settings/changed``, schedules pausing): a closure wired in ``compose``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import anyio

from ..errors import ToolsSwitchedOff
from ..store import Database
from ..store.settings import TOOLS_ENABLED, SettingsRepo, tools_enabled

log = logging.getLogger("sidecar.tools")

P = ParamSpec("P")
T = TypeVar("T")
OnChange = Callable[[bool], Awaitable[None]]


class Killed(Exception):
    """A call stopped by the switch while its tool ran (its record says ``killed``)."""

    message = "stopped: the user switched tools off while this call was running"


class ToolSwitch:
    def __init__(self, repo: SettingsRepo, enabled: bool, on_change: OnChange | None = None) -> None:
        self.repo = repo
        self._enabled = enabled
        self._stored = enabled
        self._on_change = on_change
        self._running: set[anyio.CancelScope] = set()

    @classmethod
    async def load(cls, db: Database, on_change: OnChange | None = None) -> ToolSwitch:
        return cls(SettingsRepo(db), await tools_enabled(db), on_change)

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def running(self) -> int:
        """Tool runs the switch would stop now."""
        return len(self._running)

    def check(self) -> None:
        if not self._enabled:
            raise ToolsSwitchedOff()

    async def run(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(...)``, stopped if tools go off while it runs: then ``Killed`` (also when they went
        off after the call was admitted, while it waited for its chat's lock)."""
        if not self._enabled:
            raise Killed()
        scope = anyio.CancelScope()
        self._running.add(scope)
        try:
            with scope:
                return await fn(*args, **kwargs)
        finally:
            self._running.discard(scope)
        raise Killed()  # reached only when the switch cancelled the scope (it swallowed the cancel)

    async def set(self, enabled: bool) -> None:
        """Turn every tool on or off; stored, so it holds across restarts. Off takes effect
        before it is stored: nothing starts or goes on running meanwhile, and a failed write
        (StorageError, raised) still leaves tools off for this run."""
        if enabled == self._enabled == self._stored:
            return
        if not enabled:
            self._enabled = False
            stopped = list(self._running)
            for scope in stopped:
                scope.cancel()
            log.info("tools switched off by the user; %d running tool calls stopped", len(stopped))
            await self.repo.save({TOOLS_ENABLED: False})
        else:
            await self.repo.save({TOOLS_ENABLED: True})
            self._enabled = True
            log.info("tools switched on by the user")
        self._stored = enabled
        if self._on_change is not None:
            await self._on_change(enabled)
