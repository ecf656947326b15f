"""A change journal for one workspace directory, fed by the OS file watcher (watchfiles' Rust
``notify``), like git's fsmonitor: a snapshot then stats only the paths that changed.

Events arrive asynchronously, so a snapshot first *syncs*: it creates a cookie file and waits until
the watcher reports it. Everything written before the cookie has then been reported too (the
same trick Watchman uses). Whenever the journal may have missed something (the watcher is not
running, a burst too large to trust, a sync that times out) it says so and the caller walks the
whole tree instead.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchfiles._rust_notify import RustNotify

log = logging.getLogger("sidecar.workspace")

COOKIE_PREFIX = ".sidecar-sync-"
STEP_MS = 3  # how often the Rust side hands over events: bounds the latency of a sync
BURST_LIMIT = 10_000  # one batch this large may hide an event-queue overflow: distrust it
RESTART_FIRST, RESTART_MAX = 0.25, 30.0  # seconds before a failed watcher is replaced
_cookie_ids = itertools.count(1)


class Journal:
    def __init__(self, root: Path, on_activity: Callable[[], None] | None = None) -> None:
        self.root = root
        self._prefix = str(root) + os.sep
        self._on_activity = on_activity
        self._cond = threading.Condition()
        self._dirty: set[str] = set()
        self._cookies: set[str] = set()
        self._trusted = False
        self._down = False  # between a watcher that failed and its replacement
        self._healthy = False  # the current watcher has delivered events
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        from watchfiles._rust_notify import RustNotify  # loaded with the first workspace

        self.root.mkdir(parents=True, exist_ok=True)
        try:
            notify = RustNotify([str(self.root)], False, False, 50, True, True)
        except Exception as exc:  # inotify limits, unsupported file systems, ...
            log.warning("no file watcher for %s (%s): snapshots will walk the tree", self.root, exc)
            return False
        self._thread = threading.Thread(
            target=self._run, args=(notify,), name=f"watch-{self.root.parent.name[:8]}", daemon=True
        )
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._trusted = False
            self._cond.notify_all()

    def _run(self, notify: RustNotify) -> None:
        failures = 0
        try:
            while self._follow(notify):
                # A name that is not valid UTF-8 made every later ``watch`` fail with the same
                # error (watchfiles never clears the event), so a fresh watcher takes over. A
                # folder with such a name fails the fresh one at once too (registering it reports
                # it), hence the growing pause. Meanwhile the journal is distrusted: snapshots walk.
                with self._cond:
                    self._down, self._trusted = True, False
                    self._cond.notify_all()
                failures += 1
                if failures == 1:
                    log.info("the file watcher for %s met a name that is not UTF-8; restarting it", self.root)
                if self._stop.wait(min(RESTART_MAX, RESTART_FIRST * 2 ** (failures - 1))):
                    return
                from watchfiles._rust_notify import RustNotify  # already loaded by start()

                notify = RustNotify([str(self.root)], False, False, 50, True, True)
                with self._cond:
                    self._down = False
                if self._on_activity is not None:
                    self._on_activity()  # what changed while it was down is saved by a walk
                if self._healthy:
                    failures = 0
        except Exception:
            log.exception("the file watcher for %s failed; snapshots will walk the tree", self.root)
        finally:
            with self._cond:
                self._trusted = False
                self._cond.notify_all()

    def _follow(self, notify: RustNotify) -> bool:
        """Hand over events until stopped (False) or until the watcher must be replaced (True)."""
        self._healthy = False
        with notify:
            while not self._stop.is_set():
                try:
                    batch = notify.watch(20, STEP_MS, 1000, self._stop)
                except Exception as exc:  # WatchfilesRustInternalError("Unable to decode path ...")
                    if "decode" not in str(exc):
                        raise
                    return True
                if isinstance(batch, str):
                    continue  # 'timeout' / 'signal'; 'stop' ends via the flag
                self._healthy = True  # it delivered events: a later failure starts a short pause
                self._record(batch)
        return False

    def _record(self, batch: set[tuple[int, str]]) -> None:
        outside = False
        with self._cond:
            if len(batch) >= BURST_LIMIT:
                self._trusted = False
            for _, path in batch:
                if not path.startswith(self._prefix):
                    self._trusted = False  # the root itself moved or vanished
                    continue
                rel = path[len(self._prefix):].replace(os.sep, "/")
                name = rel.rpartition("/")[2]
                if name.startswith(COOKIE_PREFIX):
                    self._cookies.add(name)
                else:
                    self._dirty.add(rel)
                    outside = True
            self._cond.notify_all()
        if outside and self._on_activity is not None:
            self._on_activity()

    def _sync(self, timeout: float) -> bool:
        name = f"{COOKIE_PREFIX}{os.getpid()}-{next(_cookie_ids)}"
        cookie = self.root / name
        try:
            cookie.touch()
            cookie.unlink()
        except OSError:
            return False
        with self._cond:
            seen = self._cond.wait_for(lambda: name in self._cookies or self._stop.is_set(), timeout)
            self._cookies.discard(name)
            return seen and not self._stop.is_set()

    def take(self, timeout: float = 0.5) -> set[str] | None:
        """Paths changed since the last ``take``/``restart``, or None when only a full walk is safe.
        Blocking: call it on a worker thread."""
        if not self.running or self._down or not self._trusted or not self._sync(timeout):
            return None
        with self._cond:
            if not self._trusted:
                return None
            dirty, self._dirty = self._dirty, set()
            return dirty

    def forget(self) -> None:
        """Call right before a full walk that did not need ``take``: no sync with the watcher,
        since an event still in flight only lands in the next ``take`` (a harmless extra path)."""
        with self._cond:
            self._dirty.clear()

    def restart(self, timeout: float = 0.5) -> None:
        """Call right before a full walk: from here on the journal is complete again. (Clearing
        *before* the walk means a change made during it stays in the journal.)"""
        if not self.running or self._down:  # no cookie can be reported: do not wait for one
            return
        synced = self._sync(timeout)
        with self._cond:
            self._dirty.clear()
            self._trusted = synced
