"""The versioning core: each chat's directory as a chain of manifests, behind one lock per chat.

Invariant: when a chat's lock is free, its workspace directory holds exactly its active manifest,
except for edits made from outside, which ``capture`` turns into a new ``edit`` manifest before
anything else touches the directory. So nothing a user or tool wrote is ever overwritten unseen.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, TypeVarTuple, Unpack

import anyio
import anyio.to_thread

from ..errors import NotFound, StorageError
from ..store import Database
from ..store.chats import ChatRepo, ChatRow
from ..store.db import Work
from ..store.manifests import ManifestRepo, ManifestRow, ManifestSource
from .blobs import BlobStore, MissingBlob
from .outside_edits import ChangeListener, Changes, OutsideEdits, UnversionedListener
from .tree import Budget, Files, ScanResult, Tree, diff, remove_leftovers
from .watcher import Journal

SAVE_CACHE_AFTER = 1 << 20  # bytes hashed since the stat cache was saved: then it is saved again
# A snapshot of a tree this small (files in its last version) is first tried on the event loop,
# within this budget (``Tree.scan_within``): about 0.1 ms of walking a 20-file tree, against
# 0.15-0.25 ms for the hop to a worker thread and back, on every tool call in a chat.
INLINE_SCAN_FILES = 64
INLINE_SCAN_BUDGET = (128, 128 << 10)  # directory entries, bytes of changed files to hash

log = logging.getLogger("sidecar.workspace")

T = TypeVar("T")
Args = TypeVarTuple("Args")


@dataclass
class ChatWorkspace:
    chat_id: str
    tree: Tree
    blobs: BlobStore
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    active_manifest_id: str | None = None
    active_files: Files = field(default_factory=Files)
    loaded: bool = False  # active_* read from the database
    in_sync: bool = False  # the directory is known to hold active_files (else: walk it all)
    journal: Journal | None = None  # set while outside edits are watched
    announced: set[str] = field(default_factory=set[str])  # unversioned paths the UI has heard of


class Versions:
    def __init__(self, db: Database, data_dir: Path, *, on_change: ChangeListener | None = None,
                 on_unversioned: UnversionedListener | None = None, watch: bool = True) -> None:
        self.db = db
        self.chats = ChatRepo(db)
        self.manifests = ManifestRepo(db)
        self.data_dir = data_dir
        self.root = data_dir / "chats"
        self._open: dict[str, ChatWorkspace] = {}
        self.edits = OutsideEdits(self._save_outside_edits, on_change, enabled=watch)
        self._on_unversioned = on_unversioned

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        """Called once the app's task group runs: watchers need somewhere to live."""
        self.edits.bind(tg)

    async def aclose(self) -> None:
        self.edits.close()
        for ws in self._open.values():
            try:
                await self.run(ws.tree.save_cache)
            except StorageError as exc:
                log.warning("could not save the stat cache of chat %s: %s", ws.chat_id, exc)

    # -- chats and their directories ------------------------------------------------------------

    def chat_dir(self, chat_id: str) -> Path:
        return self.root / chat_id

    def workspace_path(self, chat_id: str) -> Path:
        return self.chat_dir(chat_id) / "workspace"

    async def require_chat(self, chat_id: str) -> ChatRow:
        chat = await self.chats.get(chat_id)
        if chat is None:
            raise NotFound("chat", chat_id)
        return chat

    def _workspace(self, chat_id: str) -> ChatWorkspace:
        ws = self._open.get(chat_id)
        if ws is None:
            directory = self.chat_dir(chat_id)  # chat_id comes from the database, never raw input
            blobs = BlobStore(directory / "blobs")
            tree = Tree(directory / "workspace", blobs, directory / "statcache")
            ws = self._open[chat_id] = ChatWorkspace(chat_id, tree, blobs)
        return ws

    @asynccontextmanager
    async def locked(
        self, chat_id: str, first: Callable[[str | None], Work] | None = None,
    ) -> AsyncGenerator[tuple[ChatWorkspace, ChatRow], None]:
        """The chat's lock, with its workspace brought in line with the database. ``first``:
        statements for the transaction that reads the chat under the lock (one trip to the
        database's thread for both), given the version the folder holds; they run only when the
        folder needs nothing done first (in sync, at the chat's version), which they can record."""
        if chat_id not in self._open:  # (an open one's id was found in the database already)
            await self.require_chat(chat_id)  # an unknown id never names a folder
        ws = self._workspace(chat_id)
        async with ws.lock:
            # It may have been deleted while we waited.
            if first is not None and ws.loaded and ws.in_sync:
                held = ws.active_manifest_id
                found = await self.chats.get_then(
                    chat_id, lambda row: first(held) if row.active_manifest_id == held else None)
                if found is None:
                    raise NotFound("chat", chat_id)
                chat = found
            else:
                chat = await self.require_chat(chat_id)
            if not ws.loaded or ws.active_manifest_id != chat.active_manifest_id:
                await self._load_active(ws, chat)
                await self._finish_switch(ws, chat)
            self.edits.watch(ws)
            try:
                yield ws, chat
            except BaseException:
                ws.in_sync = False  # an operation broke off: trust only a full walk next time
                raise

    async def _load_active(self, ws: ChatWorkspace, chat: ChatRow) -> None:
        files: Files = {}
        if chat.active_manifest_id:
            m = await self.manifests.get(chat.id, chat.active_manifest_id)
            files = m.files if m else {}
        first_time = not ws.loaded and not ws.tree.root.exists()
        ws.active_manifest_id, ws.active_files, ws.loaded = chat.active_manifest_id, files, True
        ws.in_sync = False
        if first_time and files:
            # The directory was lost (or never made on this machine): rebuild it.
            await self.run(ws.tree.materialize, Files(), files)

    async def forget(self, chat_id: str) -> None:
        """The chat was deleted: drop its state and directory (call with the lock held)."""
        ws = self._open.pop(chat_id, None)
        if ws is not None:
            self.edits.unwatch(ws)
        await anyio.to_thread.run_sync(shutil.rmtree, self.chat_dir(chat_id), True)

    # -- capture and switch (lock held) ---------------------------------------------------------

    async def capture(
        self, ws: ChatWorkspace, chat: ChatRow, source: ManifestSource = "edit", source_ref: str | None = None,
        also: Callable[[str | None], Work] | None = None,
    ) -> ManifestRow | None:
        """Snapshot the directory; when it differs from the active manifest, store a new manifest,
        make it active and record it as the state after the active leaf message. ``also``: given
        the id of the version the directory holds (new or not), what to write in the same
        transaction (a tool call's end: one trip to the database's thread for both); it is
        written, alone if no version is new, once this returns."""
        last = ws.active_files if ws.in_sync else None
        scan = None
        if last is not None and len(last) <= INLINE_SCAN_FILES:
            scan = self._inline(_scan_small, ws.tree, ws.journal, last, Budget(*INLINE_SCAN_BUDGET))
        if scan is None:
            scan = await self.run(_scan, ws.tree, ws.journal, last)
        ws.in_sync = True
        if scan.skipped:
            log.debug("snapshot of %s skipped links/special files: %s", chat.id, scan.skipped[:5])
        manifest = None
        if scan.files != ws.active_files:
            manifest = self.manifests.new(chat.id, ws.active_manifest_id, scan.files, source, source_ref)
            await self.manifests.make_active(manifest, chat.active_leaf_message_id,
                                             also(manifest.id) if also is not None else None)
            ws.active_manifest_id, ws.active_files = manifest.id, scan.files
            chat.active_manifest_id = manifest.id
        elif also is not None:
            await self.db.write_whole(also(ws.active_manifest_id))
        if scan.unversioned:
            await self._announce_unversioned(ws, scan.unversioned)
        return manifest

    async def switch(self, ws: ChatWorkspace, chat: ChatRow, leaf_id: str | None, manifest_id: str | None) -> None:
        """Move the chat to ``leaf_id`` with its files ``manifest_id`` (None: empty), touching only
        the files that differ. Where the chat goes is stored before the first file moves and
        forgotten in the transaction that moves the chat: a crash (or a failure) in between
        leaves a folder that is neither branch, which ``_finish_switch`` completes instead of
        saving it as an edit of the branch being left."""
        target = await self._files(ws.chat_id, manifest_id)
        if not ws.in_sync:
            await self.capture(ws, chat)
        moving = manifest_id != ws.active_manifest_id
        if moving:
            # From here until the position moves, the next lock looks for the switch and finishes
            # it (set first: the record may be committed even if this task is cancelled in it).
            ws.loaded = ws.in_sync = False
            await self.chats.begin_switch(chat.id, leaf_id, manifest_id)
            await self.run(ws.tree.materialize, ws.active_files, target)
            ws.active_manifest_id, ws.active_files, ws.in_sync = manifest_id, target, True
        await self.chats.set_position(chat.id, leaf_id, manifest_id, switched=moving)
        ws.loaded = True
        chat.active_leaf_message_id, chat.active_manifest_id = leaf_id, manifest_id

    async def materialize(self, ws: ChatWorkspace, manifest_id: str | None) -> Files:
        """Make the folder hold ``manifest_id`` (None: empty) at the chat's current message: a
        ``switch`` that keeps the leaf, so a crash in it is finished as any switch is."""
        chat = await self.require_chat(ws.chat_id)
        await self.switch(ws, chat, chat.active_leaf_message_id, manifest_id)
        return ws.active_files

    async def _files(self, chat_id: str, manifest_id: str | None) -> Files:
        if not manifest_id:
            return {}
        m = await self.manifests.get(chat_id, manifest_id)
        if m is None:
            raise NotFound("manifest", manifest_id)
        return m.files

    async def _finish_switch(self, ws: ChatWorkspace, chat: ChatRow) -> None:
        """Complete a switch that was cut off (by a crash, or a failure mid-way), before anything
        snapshots the half-switched folder. Finishing is what the user asked for, and the branch
        being left lost nothing: its files were saved before the switch began. Only when the target
        is gone (or cannot be written) is the switch rolled back to the branch being left."""
        pending = await self.chats.pending_switch(chat.id)
        if pending is None:
            return
        leaf, manifest_id = pending.leaf_message_id, pending.manifest_id
        try:
            if leaf is not None and leaf not in {m.id for m in await self.chats.messages(chat.id)}:
                raise NotFound("message", leaf)
            target = await self._files(chat.id, manifest_id)
            await self._rebuild(ws, target)
        except (NotFound, StorageError) as exc:
            log.error("chat %s: cannot finish the branch switch a crash cut off (%s); going back to the "
                      "branch it left", chat.id, exc)
            await self._rebuild(ws, ws.active_files)  # (the chat's position never moved)
            await self.chats.end_switch(chat.id)
            return
        await self.chats.set_position(chat.id, leaf, manifest_id, switched=True)
        log.warning("chat %s: finished the branch switch begun at %s that was cut off", chat.id, pending.started_at)
        ws.active_manifest_id, ws.active_files, ws.in_sync = manifest_id, target, True
        chat.active_leaf_message_id, chat.active_manifest_id = leaf, manifest_id

    async def _rebuild(self, ws: ChatWorkspace, target: Files) -> None:
        """Make a folder in an unknown state hold ``target``: walk what is there (unchanged files
        are known by the stat cache; written ones are hashed), then touch what differs."""
        ws.in_sync = False
        left = await self.run(remove_leftovers, ws.tree.root)
        if left:
            log.info("chat %s: removed temporary files a cut-off switch left: %s", ws.chat_id, left[:5])
        found = await self.run(ws.tree.scan)
        await self.run(ws.tree.materialize, found.files, target)
        await self.run(ws.tree.save_cache)

    async def finish_switches(self) -> None:
        """At start-up: complete the switches the last run was killed in, without waiting for a
        request to open those chats (each under its chat's lock, as any request would)."""
        for chat_id in await self.chats.switching_chats():
            try:
                async with self.locked(chat_id):
                    pass
            except NotFound:
                pass  # deleted meanwhile (its row went with it)
            except StorageError as exc:
                log.error("chat %s: the branch switch a crash cut off stays unfinished: %s", chat_id, exc.message)

    async def _save_outside_edits(self, chat_id: str) -> tuple[str, Changes] | None:
        """Outside edits as an ``edit`` version: (its manifest id, what changed), or None."""
        async with self.locked(chat_id) as (ws, chat):
            before = ws.active_files
            manifest = await self.capture(ws, chat, "edit")
        if manifest is None:
            return None
        return manifest.id, diff(before, manifest.files)

    async def _announce_unversioned(self, ws: ChatWorkspace, paths: list[str]) -> None:
        """Tell the UI, once per path, what a snapshot had to leave out (a name that is not UTF-8
        cannot travel in JSON or be stored as a manifest key). Waits for a first version: the
        notification names one."""
        new = sorted(set(paths) - ws.announced)
        if not new or ws.active_manifest_id is None:
            return
        log.warning("chat %s: %d path(s) left out of its versions, e.g. %s", ws.chat_id, len(new), new[0])
        ws.announced.update(new)
        if self._on_unversioned is not None:
            try:
                await self._on_unversioned(ws.chat_id, ws.active_manifest_id, new)
            except Exception:  # a notification must never fail the request that took the snapshot
                log.exception("announcing unversioned paths of chat %s failed", ws.chat_id)

    async def run(self, fn: Callable[[Unpack[Args]], T], *args: *Args) -> T:
        """Blocking file work on a worker thread, its failures as ``StorageError``."""
        with _storage_errors():
            return await anyio.to_thread.run_sync(fn, *args)

    def _inline(self, fn: Callable[[Unpack[Args]], T], *args: *Args) -> T:
        """File work small and bounded enough for the event loop (``Tree.scan_within``), its
        failures as ``StorageError``, as ``run`` gives them."""
        with _storage_errors():
            return fn(*args)

    # -- reading versions -----------------------------------------------------------------------

    async def manifest_files(self, chat_id: str, manifest_id: str | None) -> tuple[str | None, Files]:
        """(manifest id, files) of ``manifest_id``, or of the current workspace when None."""
        if manifest_id is not None:
            m = await self.get_manifest(chat_id, manifest_id)
            return m.id, m.files
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)
            return ws.active_manifest_id, dict(ws.active_files)

    async def get_manifest(self, chat_id: str, manifest_id: str) -> ManifestRow:
        await self.require_chat(chat_id)
        m = await self.manifests.get(chat_id, manifest_id)
        if m is None:
            raise NotFound("manifest", manifest_id)
        return m


@contextmanager
def _storage_errors() -> Generator[None, None, None]:
    try:
        yield
    except MissingBlob as exc:
        raise StorageError(
            f"the workspace store is damaged: blob {exc.sha256} is missing ({exc.path})",
        ) from exc
    except OSError as exc:
        raise StorageError(f"workspace file operation failed: {exc}") from exc


def _scan(tree: Tree, journal: Journal | None, last: Files | None) -> ScanResult:
    """``tree.scan``, and the stat cache saved in the same trip to a thread once what it hashed
    since the last save is worth keeping: hashes are what is expensive to redo after a restart.
    A snapshot is on every tool call's path in a chat, and a call that rewrote a small file would
    otherwise write the whole cache out again for a hash that costs microseconds to redo; the
    rest waits for close."""
    scan = tree.scan(journal, last)
    _save_if_due(tree, scan)
    return scan


def _scan_small(tree: Tree, journal: Journal | None, last: Files, budget: Budget) -> ScanResult | None:
    """``_scan`` within ``budget``, on the event loop: None when the tree needs more than that."""
    scan = tree.scan_within(budget, journal, last)
    if scan is not None:
        _save_if_due(tree, scan)
    return scan


def _save_if_due(tree: Tree, scan: ScanResult) -> None:
    if scan.hashed and tree.unsaved_bytes >= SAVE_CACHE_AFTER:
        tree.save_cache()
