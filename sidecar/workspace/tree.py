"""The materialised working directory of one chat, and the stat cache that makes it cheap.

Everything here is blocking file-system work: the service runs it on a worker thread, under the
chat's lock. ``scan`` turns the directory into ``{path: sha256}`` (storing new content as blobs);
``materialize`` turns it from one files map into another by touching only what differs.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from .blobs import BlobStore, MissingBlob
from .watcher import COOKIE_PREFIX, Journal

TMP_SUFFIX = ".sidecar-tmp"
SMALL_TREE = 256  # files: below this a full walk is faster than syncing with the watcher
PARALLEL_FROM = 32  # files; below this a thread pool costs more than it saves
COPY_THREADS = 4

log = logging.getLogger("sidecar.workspace")

T = TypeVar("T")
# A file we create never follows a link at its own name: one planted there (by a tool, or an
# outside edit) must not make us write outside the workspace.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)

Files = dict[str, str]  # workspace path -> sha256


# path -> (size, mtime_ns, ctime_ns, inode, sha256): a plain tuple, compared field by field on
# the hot path of every snapshot (10,000 files must cost less than `git status`).
StatEntry = tuple[int, int, int, int, str]

_encode_cache = msgspec.msgpack.Encoder().encode
_decode_cache = msgspec.msgpack.Decoder(dict[str, tuple[int, int, int, int, str]]).decode


@dataclass
class ScanResult:
    files: Files
    skipped: list[str] = field(default_factory=list)  # symlinks and special files, never followed
    hashed: int = 0  # files whose content had to be read


def diff(old: Files, new: Files) -> tuple[list[str], list[str], list[str]]:
    """(added, removed, modified), each sorted."""
    added = sorted(p for p in new if p not in old)
    removed = sorted(p for p in old if p not in new)
    modified = sorted(p for p, sha in new.items() if p in old and old[p] != sha)
    return added, removed, modified


class Tree:
    def __init__(self, root: Path, blobs: BlobStore, cache_path: Path) -> None:
        self.root = root
        self.blobs = blobs
        self._cache_path = cache_path
        self._cache: dict[str, StatEntry] | None = None
        self._cache_changed = False

    # -- the stat cache ------------------------------------------------------------------------

    @property
    def cache(self) -> dict[str, StatEntry]:
        if self._cache is None:
            try:
                self._cache = _decode_cache(self._cache_path.read_bytes())
            except FileNotFoundError:
                self._cache = {}
            except (OSError, msgspec.DecodeError) as exc:
                log.warning("ignoring an unreadable stat cache %s: %s", self._cache_path, exc)
                self._cache = {}
        return self._cache

    def save_cache(self) -> None:
        if not self._cache_changed:
            return
        self._cache_changed = False
        tmp = self._cache_path.with_suffix(".tmp")
        tmp.write_bytes(_encode_cache(self.cache))
        os.replace(tmp, self._cache_path)

    def _remember(self, rel: str, st: os.stat_result, sha256: str) -> None:
        self.cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha256)
        self._cache_changed = True

    # -- reading the directory -----------------------------------------------------------------

    def scan(self, journal: Journal | None = None, last: Files | None = None) -> ScanResult:
        """The directory as ``{path: sha256}``. With a journal and the files map of the last scan,
        only the paths the journal names are looked at; otherwise the whole tree is walked."""
        self.root.mkdir(parents=True, exist_ok=True)
        if journal is not None and last is not None and len(last) <= SMALL_TREE:
            # Walking a small tree (cached stats, no hashing) beats a round trip to the watcher.
            journal.forget()
        else:
            dirty = journal.take() if journal is not None and last is not None else None
            if dirty is not None and "" not in dirty:
                return self._rescan(last or {}, dirty)
            if journal is not None:
                journal.restart()
        result = ScanResult(files={})
        fresh: dict[str, StatEntry] = {}
        self._walk("", str(self.root), result, fresh)
        self._cache = fresh
        self._cache_changed = True
        return result

    def _rescan(self, last: Files, dirty: set[str]) -> ScanResult:
        result = ScanResult(files=dict(last))
        files, cache = result.files, self.cache
        dirs: set[str] | None = None  # known directories, built only if a directory may be gone
        for rel in sorted(dirty):
            if _ignored(rel.rpartition("/")[2]):
                continue
            path = os.path.join(self.root, rel)
            try:
                st = os.lstat(path)
            except OSError:  # gone (or unreadable): drop it and anything that was under it
                if files.pop(rel, None) is not None:
                    cache.pop(rel, None)
                    continue
                if dirs is None:
                    dirs = _directories(files)
                if rel in dirs:
                    _drop(files, cache, rel)
                continue
            if stat.S_ISDIR(st.st_mode):
                if files.pop(rel, None) is not None:  # a file replaced by a folder of its name
                    cache.pop(rel, None)
                under = rel + "/"
                before = [k for k in files if k.startswith(under)]
                for key in before:
                    del files[key]
                seen: dict[str, StatEntry] = {}
                self._walk(under, path, result, seen)  # unchanged files still hit the cache
                for key in before:
                    if key not in seen:
                        cache.pop(key, None)
                cache.update(seen)
            elif stat.S_ISREG(st.st_mode):
                self._visit(rel, path, st, result, cache)
            else:
                _drop(files, cache, rel)
                result.skipped.append(rel)
        self._cache_changed = self._cache_changed or bool(dirty)
        return result

    def _walk(self, prefix: str, directory: str, result: ScanResult, into: dict[str, StatEntry]) -> None:
        stack = [(prefix, directory)]
        while stack:
            prefix, directory = stack.pop()
            try:
                entries = os.scandir(directory)
            except OSError as exc:
                log.warning("cannot read %s: %s", directory, exc)
                continue
            with entries:
                for entry in entries:
                    rel = prefix + entry.name
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((rel + "/", entry.path))
                    elif not entry.is_file(follow_symlinks=False):
                        result.skipped.append(rel)  # symlinks, fifos, sockets: never followed
                    elif not _ignored(entry.name):
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # removed while we looked
                        self._visit(rel, entry.path, st, result, into)

    def _visit(
        self, rel: str, path: str, st: os.stat_result, result: ScanResult, into: dict[str, StatEntry]
    ) -> None:
        known = self.cache.get(rel)
        if (
            known is not None
            and known[1] == st.st_mtime_ns
            and known[0] == st.st_size
            and known[2] == st.st_ctime_ns
            and known[3] == st.st_ino
        ):
            into[rel] = known
            result.files[rel] = known[4]
            return
        try:
            sha, _ = self.blobs.put_file(path)
        except FileNotFoundError:
            result.files.pop(rel, None)
            return
        result.hashed += 1
        result.files[rel] = sha
        into[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha)
        self._cache_changed = True

    # -- writing the directory -----------------------------------------------------------------

    def materialize(self, current: Files, target: Files) -> None:
        """Make the directory (which holds ``current``) hold exactly ``target``."""
        self.root.mkdir(parents=True, exist_ok=True)
        cache = self.cache
        emptied: set[str] = set()
        for rel in current.keys() - target.keys():
            _unlink(self.root / rel)
            cache.pop(rel, None)
            emptied.add(rel.rpartition("/")[0])
        self._prune(emptied)
        todo = [(rel, sha) for rel, sha in target.items() if current.get(rel) != sha]
        if not todo and not emptied:
            return
        root = str(self.root)
        root_was_empty = not current and not any(os.scandir(root))
        fresh = self._make_dirs({rel.rpartition("/")[0] for rel, _ in todo} - {""})
        blobs = self.blobs

        def write(items: list[tuple[str, str]]) -> list[tuple[str, os.stat_result, str]]:
            done = []
            for rel, sha in items:
                dest = os.path.join(root, rel)
                parent = rel.rpartition("/")[0]
                if parent in fresh if parent else root_was_empty:
                    st = _copy(blobs, sha, dest)  # a folder we just made: nothing to replace
                elif rel in current or os.path.lexists(dest):
                    if os.path.isdir(dest) and not os.path.islink(dest):
                        shutil.rmtree(dest)
                    # Replace, never rewrite in place: an editor holding the file sees old or new.
                    st = _copy(blobs, sha, dest, replace=True)
                else:
                    st = _copy(blobs, sha, dest)
                done.append((rel, st, sha))
            return done

        # File system calls release the GIL: a few threads overlap their waits (git checks out
        # one file at a time). One chunk per thread keeps the pool's own overhead out of it.
        if len(todo) >= PARALLEL_FROM:
            chunks = [todo[i::COPY_THREADS] for i in range(COPY_THREADS)]
            with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="materialize") as pool:
                written = [w for part in pool.map(write, chunks) for w in part]
        else:
            written = write(todo)
        for rel, st, sha in written:
            cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha)
        self._cache_changed = True

    def _make_dirs(self, dirs: set[str]) -> set[str]:
        """Create the directories files go into, one component at a time: a symlink or a file
        standing where the target needs a directory is removed, never followed (a link placed in
        the workspace must not make us write outside it). Returns the directories it created."""
        root = str(self.root)
        ready: set[str] = set()
        created: set[str] = set()
        for directory in sorted(dirs):
            prefix = ""
            for part in directory.split("/"):
                prefix = f"{prefix}/{part}" if prefix else part
                if prefix in ready:
                    continue
                path = os.path.join(root, prefix)
                if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                    os.unlink(path)
                if not os.path.isdir(path):
                    os.mkdir(path)
                    created.add(prefix)
                ready.add(prefix)
        return created

    def _prune(self, dirs: set[str]) -> None:
        """Remove directories left empty, walking up towards the root."""
        for rel in sorted(dirs, key=len, reverse=True):
            while rel:
                try:
                    os.rmdir(self.root / rel)
                except OSError:
                    break  # not empty (or already gone): stop climbing
                rel = rel.rpartition("/")[0]


def _ignored(name: str) -> bool:
    """Our own transient files: sync cookies and half-written temp files."""
    return name.startswith(COOKIE_PREFIX) or name.endswith(TMP_SUFFIX)


def _directories(files: Files) -> set[str]:
    dirs: set[str] = set()
    for path in files:
        d = path.rpartition("/")[0]
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    return dirs


def _drop(files: Files, cache: dict[str, StatEntry], rel: str) -> None:
    files.pop(rel, None)
    cache.pop(rel, None)
    under = rel + "/"
    for key in [k for k in files if k.startswith(under)]:
        del files[key]
        cache.pop(key, None)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(path)


def replace_atomic(dest: str | os.PathLike[str], fill: Callable[[int], T]) -> T:
    """Replace ``dest`` atomically: ``fill`` writes the new content to a temporary file next to
    it (given its descriptor), which then takes ``dest``'s place. The temporary file is created
    afresh, never through a link or file already at its name (a leftover is removed first)."""
    dest = os.fspath(dest)
    head, name = os.path.split(dest)
    tmp = os.path.join(head, f".{name}{TMP_SUFFIX}")
    try:
        os.unlink(tmp)  # a leftover, or a planted link: unlink removes the link, not its target
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):
        if not os.path.isdir(tmp) or os.path.islink(tmp):
            raise
        shutil.rmtree(tmp)
    fd = os.open(tmp, _CREATE, 0o644)
    try:
        try:
            result = fill(fd)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return result


def write_atomic(dest: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``dest`` with ``data`` atomically (see ``replace_atomic``)."""

    def fill(fd: int) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    replace_atomic(dest, fill)


def _copy(blobs: BlobStore, sha256: str, dest: str, *, replace: bool = False) -> os.stat_result:
    """Copy a blob to ``dest`` (a real copy, never a hard link: a tool editing the file would
    edit the blob) and return the new file's stat. ``replace``: ``dest`` may exist and is
    replaced atomically; otherwise nothing is there and the file is created, never through a link."""
    try:
        src = os.open(blobs.path(sha256), os.O_RDONLY)
    except FileNotFoundError:
        raise MissingBlob(sha256, blobs.path(sha256)) from None
    try:
        if replace:
            return replace_atomic(dest, lambda fd: _copy_into(src, fd))
        fd = os.open(dest, _CREATE, 0o644)
        try:
            return _copy_into(src, fd)
        finally:
            os.close(fd)
    finally:
        os.close(src)


def _copy_into(src: int, fd: int) -> os.stat_result:
    remaining = os.fstat(src).st_size
    try:
        while remaining > 0:
            n = os.copy_file_range(src, fd, remaining)
            if n == 0:
                break
            remaining -= n
    except (AttributeError, OSError):  # no copy_file_range here: plain copy
        os.lseek(src, 0, os.SEEK_SET)
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        while chunk := os.read(src, 1 << 20):
            os.write(fd, chunk)
    return os.fstat(fd)
