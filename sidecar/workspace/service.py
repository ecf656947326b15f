"""The workspace service: each chat's files, versioned by manifest, behind one lock per chat.

Invariant: when a chat's lock is free, its workspace directory holds exactly its active manifest,
except for edits made from outside, which ``capture`` turns into a new ``edit`` manifest before
anything else touches the directory. So nothing a user or tool wrote is ever overwritten unseen.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from ..api.errors import InvalidParams, NotFound, StorageError
from ..store import Database
from ..store.chats import ChatRepo, ChatRow
from ..store.manifests import ManifestRepo, ManifestRow
from . import paths
from .blobs import BlobStore, MissingBlob
from .tree import TMP_SUFFIX, Files, Tree, diff
from .watcher import Journal

log = logging.getLogger("sidecar.workspace")

MAX_WATCHED = 16  # chats whose folders are watched at once (least recently used is dropped)
EDIT_DEBOUNCE = 0.3  # seconds of quiet before outside edits are saved as a version
ChangeListener = Callable[[str, str, tuple[list[str], list[str], list[str]]], Awaitable[None]]

DEFAULT_READ_LIMIT = 8 << 20
MAX_READ_LIMIT = 48 << 20  # base64 of this still fits the 64 MiB line cap


@dataclass
class ChatWorkspace:
    chat_id: str
    dir: Path
    tree: Tree
    blobs: BlobStore
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    active_manifest_id: str | None = None
    active_files: Files = field(default_factory=dict)
    loaded: bool = False  # active_* read from the database
    in_sync: bool = False  # the directory is known to hold active_files (else: walk it all)
    journal: Journal | None = None
    follower: anyio.CancelScope | None = None
    activity: anyio.Event = field(default_factory=anyio.Event)
    activity_at: float = 0.0

    def poke(self) -> None:
        self.activity_at = time.monotonic()
        self.activity.set()


@dataclass
class FileInfo:
    path: str
    size: int
    sha256: str


@dataclass
class FileContent:
    path: str
    size: int
    sha256: str
    data: bytes


class WorkspaceService:
    def __init__(self, db: Database, data_dir: Path, *, watch: bool = True) -> None:
        self.db = db
        self.chats = ChatRepo(db)
        self.manifests = ManifestRepo(db)
        self.root = data_dir / "chats"
        self._open: dict[str, ChatWorkspace] = {}
        self._watch = watch
        self._watched: OrderedDict[str, ChatWorkspace] = OrderedDict()  # least recently used first
        self._tg: TaskGroup | None = None
        self._on_change: ChangeListener | None = None

    def bind(self, tg: TaskGroup, on_change: ChangeListener) -> None:
        """Called once the app's task group runs: watchers need somewhere to live."""
        self._tg, self._on_change = tg, on_change
        # The watcher thread must never wait for the loop: the loop may itself be waiting (on a
        # worker thread) for that watcher to report a sync cookie. So hand over without blocking.
        self._loop = asyncio.get_running_loop()  # anyio runs on asyncio here (pinned)

    async def aclose(self) -> None:
        for ws in list(self._watched.values()):
            self._unwatch(ws)
        for ws in self._open.values():
            try:
                await self._run(ws.tree.save_cache)
            except StorageError as exc:
                log.warning("could not save the stat cache of chat %s: %s", ws.chat_id, exc)

    # -- watching for outside edits ---------------------------------------------------------------

    def _ensure_watched(self, ws: ChatWorkspace) -> None:
        if not self._watch or self._tg is None:
            return
        if ws.journal is not None:
            self._watched.move_to_end(ws.chat_id)
            return
        loop = self._loop

        def on_activity() -> None:  # on the watcher's thread
            try:
                loop.call_soon_threadsafe(ws.poke)
            except RuntimeError:
                pass  # the loop is closed

        journal = Journal(ws.tree.root, on_activity)
        if not journal.start():
            return
        ws.journal = journal
        self._watched[ws.chat_id] = ws
        while len(self._watched) > MAX_WATCHED:
            self._unwatch(next(iter(self._watched.values())))
        ws.follower = anyio.CancelScope()
        self._tg.start_soon(self._follow, ws, ws.follower)

    def _unwatch(self, ws: ChatWorkspace) -> None:
        self._watched.pop(ws.chat_id, None)
        if ws.journal is not None:
            ws.journal.stop()
            ws.journal = None
        if ws.follower is not None:
            ws.follower.cancel()
            ws.follower = None

    async def _follow(self, ws: ChatWorkspace, scope: anyio.CancelScope) -> None:
        """Save outside edits as ``edit`` versions once they settle, and announce them."""
        with scope:
            while True:
                await ws.activity.wait()
                ws.activity = anyio.Event()
                while (quiet := ws.activity_at + EDIT_DEBOUNCE - time.monotonic()) > 0:
                    await anyio.sleep(quiet)
                try:
                    async with self.locked(ws.chat_id) as (current, chat):
                        before = current.active_files
                        manifest = await self.capture(current, chat, "edit")
                except NotFound:
                    return  # the chat was deleted
                except Exception:
                    log.exception("saving outside edits of chat %s failed", ws.chat_id)
                    continue
                if manifest is not None and self._on_change is not None:
                    await self._on_change(chat.id, manifest.id, diff(before, manifest.files))

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
            ws = self._open[chat_id] = ChatWorkspace(chat_id, directory, tree, blobs)
        return ws

    @asynccontextmanager
    async def locked(self, chat_id: str) -> AsyncIterator[tuple[ChatWorkspace, ChatRow]]:
        """The chat's lock, with its workspace brought in line with the database."""
        await self.require_chat(chat_id)
        ws = self._workspace(chat_id)
        async with ws.lock:
            chat = await self.require_chat(chat_id)  # it may have been deleted while we waited
            if not ws.loaded or ws.active_manifest_id != chat.active_manifest_id:
                await self._load_active(ws, chat)
            self._ensure_watched(ws)
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
            await self._run(ws.tree.materialize, {}, files)

    async def forget(self, chat_id: str) -> None:
        """The chat was deleted: drop its state and directory (call with the lock held)."""
        ws = self._open.pop(chat_id, None)
        if ws is not None:
            self._unwatch(ws)
        await anyio.to_thread.run_sync(shutil.rmtree, self.chat_dir(chat_id), True)

    # -- capture and switch (lock held) ---------------------------------------------------------

    async def capture(
        self, ws: ChatWorkspace, chat: ChatRow, source: str = "edit", source_ref: str | None = None
    ) -> ManifestRow | None:
        """Snapshot the directory; when it differs from the active manifest, store a new manifest,
        make it active and record it as the state after the active leaf message."""
        last = ws.active_files if ws.in_sync else None
        scan = await self._run(ws.tree.scan, ws.journal, last)
        ws.in_sync = True
        if scan.skipped:
            log.debug("snapshot of %s skipped links/special files: %s", chat.id, scan.skipped[:5])
        if scan.hashed:  # hashes are what is expensive to redo after a restart; the rest waits
            await self._run(ws.tree.save_cache)  # for close
        if scan.files == ws.active_files:
            return None
        manifest = self.manifests.new(chat.id, ws.active_manifest_id, scan.files, source, source_ref)
        sql, args = self.manifests.insert_sql(manifest)
        async with self.db.write() as w:
            await w.execute(sql, args)
            await w.execute(
                "UPDATE chats SET active_manifest_id = ?, updated_at = ? WHERE id = ?",
                (manifest.id, manifest.created_at, chat.id),
            )
            if chat.active_leaf_message_id:
                await w.execute(
                    "UPDATE messages SET manifest_id = ? WHERE id = ?",
                    (manifest.id, chat.active_leaf_message_id),
                )
        ws.active_manifest_id, ws.active_files = manifest.id, scan.files
        chat.active_manifest_id = manifest.id
        return manifest

    async def materialize(self, ws: ChatWorkspace, manifest_id: str | None) -> Files:
        """Make the directory hold ``manifest_id`` (None: empty), touching only what differs."""
        target: Files = {}
        if manifest_id:
            m = await self.manifests.get(ws.chat_id, manifest_id)
            if m is None:
                raise NotFound("manifest", manifest_id)
            target = m.files
        if not ws.in_sync:
            await self.capture(ws, await self.require_chat(ws.chat_id))
        ws.in_sync = False
        await self._run(ws.tree.materialize, ws.active_files, target)
        ws.active_manifest_id, ws.active_files, ws.in_sync = manifest_id, target, True
        return target

    async def _run(self, fn: Callable[..., object], *args: object):  # type: ignore[no-untyped-def]
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except MissingBlob as exc:
            raise StorageError(
                f"the workspace store is damaged: blob {exc.sha256} is missing ({exc.path})",
            ) from exc
        except OSError as exc:
            raise StorageError(f"workspace file operation failed: {exc}") from exc

    # -- reading ---------------------------------------------------------------------------------

    async def manifest_files(self, chat_id: str, manifest_id: str | None) -> tuple[str | None, Files]:
        """(manifest id, files) of ``manifest_id``, or of the current workspace when None."""
        if manifest_id is not None:
            await self.require_chat(chat_id)
            m = await self.manifests.get(chat_id, manifest_id)
            if m is None:
                raise NotFound("manifest", manifest_id)
            return m.id, m.files
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)
            return ws.active_manifest_id, dict(ws.active_files)

    async def list_files(self, chat_id: str, manifest_id: str | None) -> tuple[str | None, list[FileInfo]]:
        mid, files = await self.manifest_files(chat_id, manifest_id)
        blobs = self._workspace(chat_id).blobs

        def sizes() -> list[FileInfo]:
            return [FileInfo(p, blobs.size(sha), sha) for p, sha in sorted(files.items())]

        return mid, await self._run(sizes)

    async def read_file(
        self, chat_id: str, path: str, manifest_id: str | None, max_bytes: int = DEFAULT_READ_LIMIT
    ) -> FileContent:
        rel = _checked(path)
        if not 0 < max_bytes <= MAX_READ_LIMIT:
            raise InvalidParams("params.maxBytes", f"must be between 1 and {MAX_READ_LIMIT}")
        _, files = await self.manifest_files(chat_id, manifest_id)
        sha = files.get(rel)
        if sha is None:
            if any(p.startswith(rel + "/") for p in files):
                raise InvalidParams("params.path", f"{rel!r} is a directory, not a file")
            raise NotFound("file", rel, f"no file {rel!r} in this workspace version")
        blobs = self._workspace(chat_id).blobs
        size = await self._run(blobs.size, sha)
        if size > max_bytes:
            raise InvalidParams(
                "params.path",
                f"{rel!r} is {size} bytes, over the read limit of {max_bytes}; raise maxBytes "
                f"(up to {MAX_READ_LIMIT}) or open it from the chat's workspacePath",
            )
        data = await self._run(blobs.require(sha).read_bytes)
        return FileContent(rel, size, sha, data)

    async def diff(self, chat_id: str, old_id: str, new_id: str) -> tuple[list[str], list[str], list[str]]:
        _, old = await self.manifest_files(chat_id, old_id)
        _, new = await self.manifest_files(chat_id, new_id)
        return diff(old, new)

    async def get_manifest(self, chat_id: str, manifest_id: str) -> ManifestRow:
        await self.require_chat(chat_id)
        m = await self.manifests.get(chat_id, manifest_id)
        if m is None:
            raise NotFound("manifest", manifest_id)
        return m

    # -- writing ---------------------------------------------------------------------------------

    async def write_file(self, chat_id: str, path: str, data: bytes) -> str:
        rel = _checked(path)
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)  # outside edits first, so they get their own version
            try:
                target = paths.inside(ws.tree.root, rel)
            except paths.PathRejected as exc:
                raise InvalidParams("params.path", str(exc)) from None
            if target.is_dir() and not target.is_symlink():
                raise InvalidParams("params.path", f"{rel!r} is a directory")
            await self._run(_write_atomic, ws.tree.root, target, data)
            await self.capture(ws, chat, "edit", None)
            assert ws.active_manifest_id is not None
            return ws.active_manifest_id

    async def upload(
        self, chat_id: str, sources: list[str], dest: str
    ) -> tuple[ManifestRow, list[str], list[str]] | None:
        """Copy files in; returns (manifest, added, modified), or None when nothing changed."""
        dest_rel = _checked(dest) if dest else ""
        checked: list[Path] = []
        for i, source in enumerate(sources):
            p = Path(source)
            if not p.is_absolute():
                raise InvalidParams(f"params.paths[{i}]", "must be an absolute path on this machine")
            if not p.exists():
                raise InvalidParams(f"params.paths[{i}]", f"{source} does not exist")
            checked.append(p)
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)
            try:
                base = paths.inside(ws.tree.root, dest_rel) if dest_rel else ws.tree.root
            except paths.PathRejected as exc:
                raise InvalidParams("params.dest", str(exc)) from None
            before = ws.active_files
            await self._run(_copy_in, checked, base)
            manifest = await self.capture(ws, chat, "user_upload", None)
            if manifest is None:
                return None
            added, _, modified = diff(before, manifest.files)
            return manifest, added, modified

    async def gc(self, chat_id: str) -> tuple[int, int]:
        """Delete blobs no manifest (and not the directory itself) refers to."""
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)
            referenced: set[str] = set(ws.active_files.values())
            for files in await self.manifests.all_files(chat_id):
                referenced.update(files.values())

            def sweep() -> tuple[int, int]:
                removed = freed = 0
                for sha in ws.blobs.all():
                    if sha not in referenced:
                        freed += ws.blobs.remove(sha)
                        removed += 1
                shutil.rmtree(ws.blobs.root / "tmp", ignore_errors=True)  # crashed writes
                return removed, freed

            return await self._run(sweep)


def _checked(path: str) -> str:
    try:
        return paths.check(path)
    except paths.PathRejected as exc:
        raise InvalidParams("params.path", str(exc)) from None


def _write_atomic(root: Path, target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}{TMP_SUFFIX}")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def _copy_in(sources: list[Path], base: Path) -> None:
    base.mkdir(parents=True, exist_ok=True)
    for source in sources:
        dest = base / source.name
        if dest.is_symlink():
            dest.unlink()  # replace a link placed in the workspace; never write through it
        if source.is_dir():
            # Links inside an uploaded folder are not followed: they could point anywhere.
            shutil.copytree(source, dest, symlinks=False, ignore=_skip_links, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, dest)


def _skip_links(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if os.path.islink(os.path.join(directory, n))}


def encode_content(data: bytes) -> tuple[str | None, str | None]:
    """(text, base64): text when the bytes are UTF-8 without NUL, base64 otherwise."""
    if b"\x00" not in data:
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError:
            pass
    return None, base64.b64encode(data).decode("ascii")
