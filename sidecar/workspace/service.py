"""The workspace service: the file API (list, read, write, upload, diff, clean up) that handlers
and turns call, over the versioning core (``versions.py``: manifests, materialise, one lock per
chat) and the follower of outside edits (``outside_edits.py``).
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from ..errors import InvalidParams, NotFound, StorageError
from ..store import Database
from ..store.manifests import ManifestRow
from . import nofollow, paths
from .outside_edits import ChangeListener, Changes, UnversionedListener
from .tree import Tree, diff
from .uploads import Staged, UploadCopy, place
from .versions import ChatWorkspace, Versions

__all__ = ["ChatWorkspace", "FileContent", "FileInfo", "WorkspaceService", "encode_content"]

DEFAULT_READ_LIMIT = 8 << 20
MAX_READ_LIMIT = 48 << 20  # base64 of this still fits the 64 MiB line cap
DEFAULT_MAX_UPLOAD_BYTES = 4 << 30
PROGRESS_EVERY = 0.25  # seconds between progress reports of an upload
UPLOADS = "uploads"  # in a chat's folder, beside workspace/: uploads being copied

UploadProgress = Callable[[int, int], Awaitable[None]]  # (bytes copied, bytes planned)

log = logging.getLogger("sidecar.workspace")


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


class WorkspaceService(Versions):
    def __init__(self, db: Database, data_dir: Path, *, on_change: ChangeListener | None = None,
                 on_unversioned: UnversionedListener | None = None, watch: bool = True,
                 max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES) -> None:
        super().__init__(db, data_dir, on_change=on_change, on_unversioned=on_unversioned, watch=watch)
        self.max_upload_bytes = max_upload_bytes
        self._uploads: dict[str, set[UploadCopy]] = {}  # per chat, the uploads copying right now

    # -- reading ---------------------------------------------------------------------------------

    async def list_files(self, chat_id: str, manifest_id: str | None) -> tuple[str | None, list[FileInfo]]:
        mid, files = await self.manifest_files(chat_id, manifest_id)
        blobs = self._workspace(chat_id).blobs

        def sizes() -> list[FileInfo]:
            return [FileInfo(p, blobs.size(sha), sha) for p, sha in sorted(files.items())]

        return mid, await self.run(sizes)

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
        size = await self.run(blobs.size, sha)
        if size > max_bytes:
            raise InvalidParams(
                "params.path",
                f"{rel!r} is {size} bytes, over the read limit of {max_bytes}; raise maxBytes "
                f"(up to {MAX_READ_LIMIT}) or open it from the chat's workspacePath",
            )
        data = await self.run(blobs.require(sha).read_bytes)
        return FileContent(rel, size, sha, data)

    async def diff(self, chat_id: str, old_id: str, new_id: str) -> Changes:
        _, old = await self.manifest_files(chat_id, old_id)
        _, new = await self.manifest_files(chat_id, new_id)
        return diff(old, new)

    # -- writing ---------------------------------------------------------------------------------

    async def write_file(self, chat_id: str, path: str, data: bytes) -> str:
        rel = _checked(path, new=True)
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)  # outside edits first, so they get their own version
            try:  # never through a link, whatever a tool swaps in while this runs (see nofollow)
                await self.run(nofollow.write_file, ws.tree.root, rel, data)
            except paths.PathRejected as exc:
                raise InvalidParams("params.path", str(exc)) from None
            await self.capture(ws, chat, "edit", None)
            assert ws.active_manifest_id is not None
            return ws.active_manifest_id

    async def upload(
        self, chat_id: str, sources: list[str], dest: str, on_progress: UploadProgress | None = None
    ) -> tuple[ManifestRow, list[str], list[str]] | None:
        """Copy files in; returns (manifest, added, modified), or None when nothing changed.

        The copy (into the chat's blob store, outside ``workspace/``) runs without the chat's lock,
        so a long upload holds up nothing else on the chat; the lock is taken only to put the copied
        files in place and record the version. Cancelling stops the copy within one chunk."""
        dest_rel = _checked(dest, "params.dest", new=True) if dest else ""
        checked: list[str] = []
        for i, source in enumerate(sources):
            p = Path(source)
            if not p.is_absolute():
                raise InvalidParams(f"params.paths[{i}]", "must be an absolute path on this machine")
            if p.name in ("", ".."):  # "/" or "/a/.." would be copied as the destination itself
                raise InvalidParams(f"params.paths[{i}]", f"{source} has no name to copy it under; pick a "
                                    "file or folder inside it")
            checked.append(source)
        await self.require_chat(chat_id)
        ws = self._workspace(chat_id)
        await self.run(self._refuse_own_folders, [Path(s) for s in checked], ws.tree.root / dest_rel)
        # Early, with nothing staged yet; again under the lock.
        await self.run(_refuse_links_and_clashes, ws.tree.root, dest_rel, dict[str, Staged]())
        copy = UploadCopy(checked, dest_rel, ws.blobs, self.chat_dir(chat_id) / UPLOADS, self.max_upload_bytes)
        self._uploads.setdefault(chat_id, set()).add(copy)
        try:
            try:
                staged = await _copy_unlocked(copy, on_progress)
            except StorageError:
                await self.require_chat(chat_id)  # deleted while copying (its store went): NotFound
                raise
            if copy.skipped:
                log.debug("upload to %s skipped links: %s", chat_id, copy.skipped[:5])
            async with self.locked(chat_id) as (ws, chat):
                await self.capture(ws, chat)
                before = ws.active_files
                await self.run(_refuse_links_and_clashes, ws.tree.root, dest_rel, staged)
                todo = {rel: s for rel, s in staged.items() if before.get(rel) != s.sha256}
                if not todo:
                    return None
                assert copy.staging is not None
                ws.in_sync = False  # until the files are in place
                started = time.perf_counter()
                await self.run(_place, ws.tree, copy.staging, todo)
                ws.in_sync = True  # as after a tool run: the next capture looks at what changed
                manifest = await self.capture(ws, chat, "user_upload", None)
                log.debug("upload to %s: %d files (%d bytes) put in place and recorded in %.1f ms", chat_id,
                          len(todo), copy.done, (time.perf_counter() - started) * 1000)
        finally:
            uploads = self._uploads.get(chat_id, set())
            uploads.discard(copy)
            if not uploads:
                self._uploads.pop(chat_id, None)
            with anyio.CancelScope(shield=True):  # a cancelled upload still leaves nothing behind
                await anyio.to_thread.run_sync(copy.close)
        if manifest is None:
            return None
        added, _, modified = diff(before, manifest.files)
        return manifest, added, modified

    def _refuse_own_folders(self, sources: list[Path], base: Path) -> None:
        """A source holding our data (the database, the chats' folders) or the folder it is copied
        into would be copied into itself."""
        data = os.path.realpath(self.data_dir)
        into = os.path.realpath(base)
        for i, source in enumerate(sources):
            real = os.path.realpath(source)
            if _within(data, real):
                raise InvalidParams(f"params.paths[{i}]", f"{source} holds the app's own data folder; "
                                    "upload files or folders from elsewhere")
            if _within(into, real):
                raise InvalidParams(f"params.paths[{i}]", f"{source} holds the workspace folder it would be "
                                    "copied into: a folder cannot be copied into itself")

    async def gc(self, chat_id: str) -> tuple[int, int]:
        """Delete blobs no manifest (and not the directory itself) refers to."""
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)
            referenced: set[str] = set(ws.active_files.values())
            for files in await self.manifests.all_files(chat_id):
                referenced.update(files.values())
            uploading = self._uploads.get(chat_id, set())
            for copy in uploading:  # copied, not yet in a version
                referenced.update(copy.shas)

            def sweep() -> tuple[int, int]:
                removed = freed = 0
                for sha in ws.blobs.all_shas():
                    if sha not in referenced:
                        freed += ws.blobs.remove(sha)
                        removed += 1
                if not uploading:  # else an upload copies into them right now
                    shutil.rmtree(ws.blobs.root / "tmp", ignore_errors=True)  # crashed writes
                    shutil.rmtree(self.chat_dir(chat_id) / UPLOADS, ignore_errors=True)  # crashed uploads
                return removed, freed

            return await self.run(sweep)


def _checked(path: str, param: str = "params.path", *, new: bool = False) -> str:
    """A workspace path from the wire; ``new``: one about to be written (no reserved names)."""
    try:
        return paths.check_new(path) if new else paths.check(path)
    except paths.PathRejected as exc:
        raise InvalidParams(param, str(exc)) from None


async def _copy_unlocked(copy: UploadCopy, on_progress: UploadProgress | None) -> dict[str, Staged]:
    """Run ``copy`` on a worker thread, reporting progress every ``PROGRESS_EVERY`` seconds. A
    cancel returns at once and tells the thread to stop (it ends within one chunk)."""

    async def report() -> None:
        assert on_progress is not None
        while True:
            await anyio.sleep(PROGRESS_EVERY)
            await on_progress(copy.done, copy.total)

    result: dict[str, Staged] | None = None
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        if on_progress is not None:
            tg.start_soon(report)
        try:
            result = await anyio.to_thread.run_sync(copy.run, abandon_on_cancel=True)
        except Exception as exc:  # raised below, not from inside the task group (no ExceptionGroup)
            error = exc
        except BaseException:
            copy.stop.set()
            raise
        finally:
            tg.cancel_scope.cancel()
    if isinstance(error, OSError):
        raise StorageError(f"the upload could not be stored: {error}") from error
    if error is not None:
        raise error
    assert result is not None
    return result


def _place(tree: Tree, staging: Path, files: dict[str, Staged]) -> None:
    """Rename the staged files in and tell the stat cache what they hold (hashed while copying),
    so the snapshot that records the upload reads none of them again."""
    cache = tree.cache
    for rel, st, sha in place(tree.root, staging, files):
        cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha)


def _refuse_links_and_clashes(root: Path, dest: str, staged: Mapping[str, object]) -> None:
    """Refuse an upload whose files would go through a symbolic link in the workspace, or whose
    folders and files clash with the workspace's files and folders (blocking; lock held)."""
    folders: set[str] = set()
    for rel in [f"{dest}/-" if dest else "-", *staged]:  # every folder on the way to every file
        parent = rel.rpartition("/")[0]
        while parent and parent not in folders:
            folders.add(parent)
            parent = parent.rpartition("/")[0]
    for folder in sorted(folders):
        try:
            st = os.lstat(root / folder)
        except FileNotFoundError:
            continue
        param = "params.dest" if dest and (dest == folder or dest.startswith(folder + "/")) else "params.paths"
        if stat.S_ISLNK(st.st_mode):
            raise InvalidParams(param, f"{folder!r} in the workspace is a symbolic link, and an upload never "
                                "writes through one: remove the link or upload somewhere else")
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidParams(param, f"{folder!r} in the workspace is a file, and the upload needs a folder "
                                "there: rename or remove it, or upload somewhere else")
    for rel in staged:
        try:
            st = os.lstat(root / rel)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            raise InvalidParams("params.paths", f"{rel!r} in the workspace is a folder, and the upload has a "
                                "file of that name: rename or remove the folder, or upload somewhere else")


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def encode_content(data: bytes) -> tuple[str | None, str | None]:
    """(text, base64): text when the bytes are UTF-8 without NUL, base64 otherwise."""
    if b"\x00" not in data:
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError:
            pass
    return None, base64.b64encode(data).decode("ascii")
