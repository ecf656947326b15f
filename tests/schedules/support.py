"""What the schedule tests share: a small toolset written on the fly, the services built as the
sidecar builds them with a clock the test moves, and a UI end that records what it is told."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from sidecar import compose
from sidecar.api.chats import ConfirmToolCallResult
from sidecar.compose import Services
from sidecar.handlers.notify import Notifier
from sidecar.settings import Settings
from sidecar.store import Database
from tests.timing import scaled

MANIFEST = '''manifest_version: "1"
id: clocked
name: Clocked
version: "1.0.0"
tools:
  - id: hello
    entrypoint: tools.clocked:hello
  - id: slow
    entrypoint: tools.clocked:slow
  - id: careful
    entrypoint: tools.clocked:careful
    requires_confirmation: true
  - id: digest
    entrypoint: tools.clocked:digest
    trigger: {type: cron, schedule: "*/30", prompt: "Summarise these reminders:"}
'''

CODE = '''import time
from covalt_toolset import tool


@tool
def hello(name: str = "world") -> str:
    """Greets."""
    return f"hello {name}"


@tool
def slow(seconds: float = 1.0) -> str:
    """Takes its time."""
    time.sleep(seconds)
    return "slept"


@tool
def careful() -> str:
    """Asks first."""
    return "done carefully"


@tool
def digest() -> str:
    """Reminders due."""
    return "2 reminders overdue"
'''


def write_toolset(root: Path, manifest: str = MANIFEST) -> Path:
    folder = root / "clocked"
    (folder / "tools").mkdir(parents=True, exist_ok=True)
    (folder / "toolset.yaml").write_text(manifest)
    (folder / "tools" / "clocked.py").write_text(CODE)
    return folder


class FakeClock:
    """Wall-clock time that moves only when the test says; the scheduler's waits end when it does."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._moved = anyio.Event()

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> None:
        self.set(self._now + timedelta(**delta))

    def set(self, at: datetime) -> None:
        self._now = at
        moved, self._moved = self._moved, anyio.Event()
        moved.set()

    async def wait(self, until: datetime | None, wake: anyio.Event) -> None:
        if until is not None and self._now >= until:
            return
        async with anyio.create_task_group() as tg:
            async def on(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(on, wake)
            tg.start_soon(on, self._moved)


class RecordingPeer:
    """The UI end: keeps notifications; answers ``ui/confirmToolCall`` with ``decision``."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []
        self.decision = "deny"
        self.asked: list[Any] = []
        self.answers = True  # False: the user is away (questions are never answered)

    async def notify(self, method: str, params: Any = None) -> None:
        self.notes.append((method, params))

    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any:
        assert method == "ui/confirmToolCall", method
        self.asked.append(params)
        if not self.answers:
            await anyio.sleep_forever()
        return ConfirmToolCallResult(self.decision)  # type: ignore[arg-type]  # (decision is the test's)

    def of(self, method: str) -> list[Any]:
        return [p for m, p in self.notes if m == method]


def start_of_minute(minutes_from_now: int = 0) -> datetime:
    at = datetime.now(UTC).replace(second=0, microsecond=0)
    return at + timedelta(minutes=minutes_from_now)


@asynccontextmanager
async def built(data_dir: Path, clock: FakeClock) -> AsyncIterator[tuple[Services, RecordingPeer]]:
    """The sidecar's services over a real database and data directory, as ``compose`` builds them."""
    settings = Settings(data_dir=data_dir, secrets_backend="file")
    db = await Database.open(settings.db_path)
    peer = RecordingPeer()
    closers: list[Callable[[], Any]] = []
    try:
        async with anyio.create_task_group() as tg:
            services = await compose.build(settings, db, Notifier(peer), tg, lambda _n, fn: closers.append(fn),
                                           time.time(), clock=clock)
            try:
                yield services, peer
            finally:
                with anyio.CancelScope(shield=True):
                    for close in reversed(closers):
                        await close()
                tg.cancel_scope.cancel()
    finally:
        await db.close()


async def until(check: Callable[[], Any], limit: float = 20.0) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy."""
    with anyio.fail_after(scaled(limit)):
        while True:
            value = check()
            if hasattr(value, "__await__"):
                value = await value
            if value:
                return value
            await anyio.sleep(0.02)
