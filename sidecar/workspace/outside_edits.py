"""Edits made from outside (an editor, a shell): the OS watcher feeds each open chat's journal, and
once a chat's folder has been quiet for a moment its edits are saved as an ``edit`` version and
announced. Only the most recently used chats are watched; the others are walked when next used.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from ..errors import NotFound
from .tree import Tree
from .watcher import Journal

log = logging.getLogger("sidecar.workspace")

MAX_WATCHED = 16  # chats whose folders are watched at once (least recently used is dropped)
EDIT_DEBOUNCE = 0.3  # seconds of quiet before outside edits are saved as a version

Changes = tuple[list[str], list[str], list[str]]  # added, removed, modified
# (chat id, manifest id, changes): a version made of outside edits, for the UI to hear of.
ChangeListener = Callable[[str, str, Changes], Awaitable[None]]
# (chat id, manifest id, paths): what a snapshot found but could not version, for the UI to hear of.
UnversionedListener = Callable[[str, str, list[str]], Awaitable[None]]
# Saves a chat's outside edits under its lock: (manifest id, changes), or None when nothing changed.
SaveEdits = Callable[[str], Awaitable["tuple[str, Changes] | None"]]


class Watchable(Protocol):
    """What of a chat's workspace the watcher needs (``versions.ChatWorkspace``)."""

    chat_id: str
    tree: Tree
    journal: Journal | None


@dataclass
class _Watch:
    ws: Watchable  # its journal is set while it is watched
    follower: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    activity: anyio.Event = field(default_factory=anyio.Event)
    # Written on the watcher's thread: when activity was last seen, and whether the follower has
    # been woken for activity it has not saved yet (then later activity only moves ``last``).
    last: float = 0.0
    armed: bool = False

    def poke(self) -> None:
        self.activity.set()


class OutsideEdits:
    def __init__(self, save: SaveEdits, on_change: ChangeListener | None = None, *, enabled: bool = True) -> None:
        self._save = save
        self._on_change = on_change
        self._enabled = enabled
        self._watched: OrderedDict[str, _Watch] = OrderedDict()  # least recently used first
        self._tg: TaskGroup | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, tg: TaskGroup) -> None:
        self._tg = tg
        # The watcher thread must never wait for the loop: the loop may itself be waiting (on a
        # worker thread) for that watcher to report a sync cookie. So hand over without blocking.
        self._loop = asyncio.get_running_loop()  # anyio runs on asyncio here (pinned)

    def close(self) -> None:
        for watch in list(self._watched.values()):
            self.unwatch(watch.ws)

    def watch(self, ws: Watchable) -> None:
        """Follow ``ws``'s folder from now on (called with the chat's lock held)."""
        if not self._enabled or self._tg is None or self._loop is None:
            return
        if ws.chat_id in self._watched:
            self._watched.move_to_end(ws.chat_id)
            return
        loop = self._loop
        watch = _Watch(ws)

        def on_activity() -> None:  # on the watcher's thread
            watch.last = time.monotonic()  # the clock of asyncio's loop, so of anyio.current_time()
            if watch.armed:
                # The follower is waiting for the folder to settle and reads ``last`` when its
                # wait is up: a tool call in a row (each writes, and is snapshotted under the
                # chat's lock anyway) does not wake the loop once per event.
                return
            watch.armed = True
            try:
                loop.call_soon_threadsafe(watch.poke)
            except RuntimeError:
                pass  # the loop is closed

        journal = Journal(ws.tree.root, on_activity)
        if not journal.start():
            return
        ws.journal = journal
        self._watched[ws.chat_id] = watch
        while len(self._watched) > MAX_WATCHED:
            self.unwatch(next(iter(self._watched.values())).ws)
        self._tg.start_soon(self._follow, watch)

    def unwatch(self, ws: Watchable) -> None:
        watch = self._watched.pop(ws.chat_id, None)
        if watch is not None:
            ws = watch.ws
        journal, ws.journal = ws.journal, None
        if journal is not None:
            journal.stop()
        if watch is not None:
            watch.follower.cancel()

    async def _follow(self, watch: _Watch) -> None:
        """Save outside edits as ``edit`` versions once they settle, and announce them."""
        chat_id = watch.ws.chat_id
        with watch.follower:
            while True:
                await watch.activity.wait()
                await _settled(watch)
                try:
                    saved = await self._save(chat_id)
                except NotFound:
                    return  # the chat was deleted
                except Exception:
                    log.exception("saving outside edits of chat %s failed", chat_id)
                    continue
                if saved is not None and self._on_change is not None:
                    manifest_id, changes = saved
                    await self._on_change(chat_id, manifest_id, changes)


async def _settled(watch: _Watch) -> None:
    """Return once the folder has had no activity for ``EDIT_DEBOUNCE`` seconds, ready to be told
    of the next. Activity that comes after the last look at ``last`` and before ``armed`` is
    cleared wakes nobody, but it changed the folder before it was reported, so the save that
    follows (under the chat's lock, after this returns) sees it."""
    while True:
        left = watch.last + EDIT_DEBOUNCE - anyio.current_time()
        if left <= 0:
            break
        await anyio.sleep(left)  # an Event per activity is the wake-up this saves
    watch.activity = anyio.Event()
    watch.armed = False
