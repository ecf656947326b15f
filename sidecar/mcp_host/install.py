"""A package runner's first start: the install budget, the ``installing`` status and its progress.

One `Install` per connection attempt of a stdio server whose command is a package runner (see
``runners.py``) and which has not connected yet in this sidecar's life. It

- looks at npx's shared install folder first, repairing one the sidecar's own earlier run broke
  and naming one someone else's did (``npx_cache.py``);
- gives the handshake the server's ``install_timeout`` instead of its ``connect_timeout``;
- reports ``installing`` once the runner shows it is at work (it writes to stderr, npx's folder
  was not ready, or the connect timeout passed), with the runner's last stderr line, at most
  `RATE` times a second however much it prints (the stderr reader keeps a ring of lines, so a
  runner printing megabytes costs no memory), and every `HEARTBEAT` seconds while it is silent;
- stops the runner gently if the attempt ends before the handshake: no stdin wait, SIGTERM to its
  group and `TERM_GRACE` seconds for npm to roll its half-done install back and drop its lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..api.mcp import InstallProgress
from ..secrets import clean
from . import npx_cache
from .config import ServerConfig
from .runners import Runner, runner_env
from .state import LiveServer

if TYPE_CHECKING:
    from .stdio import StdioTransport

log = logging.getLogger("sidecar.mcp_host")

TERM_GRACE = 6.0
"""Seconds a runner stopped mid-install gets after SIGTERM (npm rolls back and unlocks in well under
one); within the host's 10 s stop deadline."""
RATE = 4.0
HEARTBEAT = 5.0
MESSAGE_CHARS = 300


class Install:
    def __init__(self, srv: LiveServer, runner: Runner, journal: npx_cache.Journal,
                 env: dict[str, str]) -> None:
        self.srv = srv
        self.runner = runner
        self.config: ServerConfig = srv.config
        self.journal = journal
        self.budget = max(srv.config.install_timeout, srv.config.connect_timeout)
        self.folder: Path | None = (npx_cache.install_dir(runner.packages, env) if runner.name == "npx" else None)
        self.note: str | None = None
        self.ready = False
        """npx's folder held a finished install before the start."""
        self.started = anyio.current_time()
        self.done = False
        env.update(runner_env(runner, env))

    async def before(self) -> None:
        """Look at (and when ours, repair) npx's install folder before the runner starts."""
        folder = self.folder
        if folder is None:
            return
        key = self.config.key
        packages = self.runner.packages
        self.note = await anyio.to_thread.run_sync(npx_cache.before_start, folder, packages, self.journal, key)
        health = await anyio.to_thread.run_sync(npx_cache.inspect, folder, packages)
        self.ready = health.state == "complete"

    async def after(self) -> None:
        """Once the runner is gone: what an interrupted npx left is ours, so it is repaired now."""
        if self.folder is None:
            return
        note: str | None = None
        with anyio.CancelScope(shield=True):
            note = await anyio.to_thread.run_sync(npx_cache.after_stop, self.folder, self.runner.packages,
                                                  self.journal, self.config.key)
        if note:
            self.note = note

    def progress(self, message: str | None, lines: int) -> InstallProgress:
        return InstallProgress(
            runner=self.runner.name, package=self.runner.package, message=message, lines=lines,
            elapsed_ms=int((anyio.current_time() - self.started) * 1000), budget_ms=int(self.budget * 1000),
            cache=str(self.folder) if self.folder is not None else None, note=self.note)

    async def watch(self, transport: StdioTransport) -> None:
        """Report the install while the handshake runs (cancelled when it ends)."""
        tail = transport.stderr
        wake = [anyio.Event()]
        loop = asyncio.get_running_loop()
        pending = threading.Event()

        def fire() -> None:  # on the loop
            pending.clear()
            wake[0].set()

        def on_line() -> None:  # the stderr thread: one hand-off in flight at a time, however fast it prints
            if not pending.is_set():
                pending.set()
                loop.call_soon_threadsafe(fire)

        announced = self.note is not None or (self.folder is not None and not self.ready)
        if tail is not None:
            tail.on_line = on_line
            if tail.count:
                announced = True
        try:
            while True:
                if announced:
                    count = tail.count if tail is not None else 0
                    message = tail.lines[-1] if tail is not None and tail.lines else None
                    await self.srv.set_install(self.progress(_short(message), count))
                    await anyio.sleep(1 / RATE)  # coalesce: at most RATE a second, however fast it prints
                with anyio.move_on_after(HEARTBEAT if announced else self.config.connect_timeout):
                    await wake[0].wait()
                wake[0] = anyio.Event()
                announced = True  # it wrote to stderr, or the connect timeout passed: it is installing
        finally:
            if tail is not None:
                tail.on_line = None

    def timed_out(self) -> str:
        what = f"{self.runner.name} did not finish installing"
        if self.runner.package:
            what += f" {self.runner.package}"
        message = f"{what} within {self.budget:g} s (installTimeout raises it); it was stopped and is retried"
        if self.note:
            message += f"; {self.note}"
        return message

    async def connected(self) -> None:
        self.done = True
        if self.folder is not None:
            await anyio.to_thread.run_sync(npx_cache.after_stop, self.folder, self.runner.packages, self.journal,
                                           self.config.key)


def _short(line: str | None) -> str | None:
    if not line:
        return None
    text = clean(line.strip())
    return text[:MESSAGE_CHARS] if text else None
