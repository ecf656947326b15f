"""The materialised working directory of one chat, and the stat cache that makes it cheap.

Everything here is blocking file-system work: the service runs it on a worker thread (a small
tree's snapshot, within a ``Budget``, on the event loop), under the chat's lock. ``scan`` turns the
directory into ``{path: sha256}`` (storing new content as blobs); ``materialize`` turns it from one
files map into another by touching only what differs.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from . import materialize, nofollow
from .blobs import BlobStore
from .nofollow import TMP_SUFFIX
from .watcher import COOKIE_PREFIX, Journal

SMALL_TREE = 256  # files: below this a full walk is faster than syncing with the watcher
RETRIES = 3  # looks at a path that changes under a snapshot before recording what was seen

log = logging.getLogger("sidecar.workspace")

# Reading: a link is never followed, a FIFO never waited on (O_NONBLOCK), a terminal never
# adopted; fstat of the descriptor then says what the entry really is. (O_CLOEXEC/O_NOCTTY are
# POSIX but absent on Windows, hence getattr.)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_OPEN_READ = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_OPEN_DIR = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_DIRECTORY", 0)
_OPEN_ROOT = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_DIRECTORY", 0)
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # what O_NOFOLLOW answers on a link (Linux, BSD)

Files = dict[str, str]  # workspace path -> sha256


# path -> (size, mtime_ns, ctime_ns, inode, sha256): a plain tuple, compared field by field on
# the hot path of every snapshot (10,000 files must cost less than `git status`).
StatEntry = tuple[int, int, int, int, str]

_encode_cache = msgspec.msgpack.Encoder().encode
_decode_cache = msgspec.msgpack.Decoder(dict[str, tuple[int, int, int, int, str]]).decode


class OverBudget(Exception):
    """A scan met more than its ``Budget`` allows (it is then done again on a worker thread)."""


@dataclass
class Budget:
    """What a scan run on the event loop may do: a small tree's snapshot costs less than the hop
    to a worker thread, as long as it lists few entries and hashes little."""

    entries: int  # directory entries it may look at
    bytes: int  # bytes of changed files it may hash


@dataclass
class ScanResult:
    files: Files
    skipped: list[str] = field(default_factory=list[str])  # symlinks and special files, never followed
    # Left out of the version: names that are not valid UTF-8 (shown with \xNN escapes; a folder
    # stands for everything under it) and entries that could not be read.
    unversioned: list[str] = field(default_factory=list[str])
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
        self.unsaved_bytes = 0  # hashed since the cache was last saved: what a restart would read again
        self._budget: Budget | None = None  # set during ``scan_within``

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
        self.unsaved_bytes = 0
        tmp = self._cache_path.with_suffix(".tmp")
        tmp.write_bytes(_encode_cache(self.cache))
        os.replace(tmp, self._cache_path)

    def _remember(self, rel: str, st: os.stat_result, sha256: str) -> None:
        self.cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha256)
        self._cache_changed = True

    # -- reading the directory -----------------------------------------------------------------
    #
    # Nothing here trusts a path to stay what it was a moment ago: a tool or an editor may turn a
    # file into a folder or a link between two calls. So every folder is opened relative to its
    # parent's descriptor with O_NOFOLLOW (a component swapped for a link can never lead out),
    # files are hashed through a descriptor whose fstat decides what the entry is, and a path that
    # changes type under us is looked at again, or recorded as what was seen: never an error.

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
        root = os.open(self.root, _OPEN_ROOT)
        try:
            self._walk("", root, result, fresh)
        finally:
            os.close(root)
        self._cache = fresh
        self._cache_changed = True
        return result

    def scan_within(
        self, budget: Budget, journal: Journal | None = None, last: Files | None = None,
    ) -> ScanResult | None:
        """``scan``, or None as soon as it would look at more entries or hash more bytes than
        ``budget`` allows. What it did by then is harmless to redo: blobs are stored by content,
        and the stat cache is replaced only by a scan that finishes."""
        self._budget = budget
        try:
            return self.scan(journal, last)
        except OverBudget:
            return None
        finally:
            self._budget = None

    def _spend(self, entries: int, size: int = 0) -> None:
        budget = self._budget
        if budget is not None:
            budget.entries -= entries
            budget.bytes -= size
            if budget.entries < 0 or budget.bytes < 0:
                raise OverBudget

    def _rescan(self, last: Files, dirty: set[str]) -> ScanResult:
        result = ScanResult(files=dict(last))
        files, cache = result.files, self.cache
        dirs: set[str] | None = None  # known directories, built only if a directory may be gone
        # Paths already looked at: what is under them was settled with them, and must not be
        # looked at again, or a path that changed meanwhile would mix two of its states.
        looked: set[str] = set()
        folders = _Folders(os.open(self.root, _OPEN_ROOT))
        try:
            for rel in sorted(dirty):
                head, _, name = rel.rpartition("/")
                if _ignored(name) or _below(rel, looked):
                    continue
                if not (rel.isascii() or is_utf8(rel)):
                    result.unversioned.append(shown_name(rel))
                    continue
                looked.add(rel)
                parent = folders.open(head)
                kind = self._look_again(parent, name, rel, result, cache) if parent is not None else None
                if kind == "dir" or kind == "other":
                    continue
                if kind is None and files.pop(rel, None) is not None:
                    cache.pop(rel, None)
                    continue
                if dirs is None:
                    dirs = _directories(files)
                if rel in dirs:  # a folder gone, or now a file: nothing under it is left
                    _drop(files, cache, rel, keep_self=kind == "file")
        finally:
            folders.close()
        self._cache_changed = self._cache_changed or bool(dirty)
        return result

    def _look_again(
        self, parent: int, name: str, rel: str, result: ScanResult, cache: dict[str, StatEntry]
    ) -> str | None:
        """Bring one path the journal named up to date. Returns what it was ("file", "dir",
        "other"), or None when it is gone. A path that keeps changing type is looked at again a
        few times, then recorded as gone: its next change is in the journal again."""
        files = result.files
        for _ in range(RETRIES):
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError:
                return None
            if stat.S_ISDIR(st.st_mode):
                try:
                    fd = os.open(name, _OPEN_DIR, dir_fd=parent)
                except OSError:
                    continue  # no longer a folder: look again
                try:
                    if files.pop(rel, None) is not None:  # a file replaced by a folder of its name
                        cache.pop(rel, None)
                    under = rel + "/"
                    before = [k for k in files if k.startswith(under)]
                    for key in before:
                        del files[key]
                    seen: dict[str, StatEntry] = {}
                    self._walk(under, fd, result, seen)  # unchanged files still hit the cache
                finally:
                    os.close(fd)
                for key in before:
                    if key not in seen:
                        cache.pop(key, None)
                cache.update(seen)
                return "dir"
            if stat.S_ISREG(st.st_mode):
                later: list[str] = []
                self._visit(parent, name, rel, st, result, cache, later)
                if not later:
                    return "file" if rel in files else None
                continue  # it became a folder while we opened it: look again
            _drop(files, cache, rel)
            result.skipped.append(rel)
            return "other"
        return None

    def _walk(self, prefix: str, folder: int, result: ScanResult, into: dict[str, StatEntry]) -> None:
        """Walk the folder open at ``folder`` (the caller closes it), depth first: only the
        folders on the current path are held open, however wide the tree."""
        stack: list[tuple[str, int, list[str]]] = [(prefix, folder, self._list(prefix, folder, result, into))]
        try:
            while stack:
                prefix, fd, todo = stack[-1]
                if not todo:
                    stack.pop()
                    if fd != folder:
                        os.close(fd)
                    continue
                name = todo.pop()
                rel = prefix + name
                opened = _open_entry(fd, name, rel, result)
                if opened is None:
                    continue
                child, st = opened
                if stat.S_ISDIR(st.st_mode):
                    stack.append((rel + "/", child, []))  # pushed before listing: closed if that fails
                    stack[-1][2].extend(self._list(rel + "/", child, result, into))
                    continue
                try:  # listed as a folder, a file by the time we opened it
                    if not stat.S_ISREG(st.st_mode):
                        result.skipped.append(rel)
                    elif not _ignored(name):
                        self._hash(child, rel, st, result, into)
                finally:
                    os.close(child)
        finally:
            for _, fd, _ in stack:
                if fd != folder:
                    os.close(fd)

    def _list(self, prefix: str, folder: int, result: ScanResult, into: dict[str, StatEntry]) -> list[str]:
        """Take in the files of one open folder; returns the names of its subfolders."""
        subfolders: list[str] = []
        try:
            entries = os.scandir(folder)
        except OSError as exc:
            log.warning("cannot read %s: %s", os.path.join(self.root, prefix), exc)
            return subfolders
        with entries:
            for entry in entries:
                self._spend(1)
                name = entry.name
                rel = prefix + name
                if not (name.isascii() or is_utf8(name)):
                    result.unversioned.append(shown_name(rel))  # and nothing under it
                elif entry.is_dir(follow_symlinks=False):
                    subfolders.append(name)
                elif not entry.is_file(follow_symlinks=False):
                    result.skipped.append(rel)  # symlinks, fifos, sockets: never followed
                elif not _ignored(name):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # removed while we looked
                    self._visit(folder, name, rel, st, result, into, subfolders)
        return subfolders

    def _visit(
        self, folder: int, name: str, rel: str, st: os.stat_result, result: ScanResult,
        into: dict[str, StatEntry], subfolders: list[str],
    ) -> None:
        """Take in the file ``name`` of ``folder`` whose lstat is ``st``: from the stat cache when
        nothing changed, else hashed through a descriptor. If it turned into a folder meanwhile,
        its name goes to ``subfolders`` to be walked."""
        known = self.cache.get(rel)
        if (
            known is not None
            and known[1] == st.st_mtime_ns
            and known[0] == st.st_size
            and known[2] == st.st_ctime_ns
            and known[3] == st.st_ino
            and stat.S_ISREG(st.st_mode)
        ):
            into[rel] = known
            result.files[rel] = known[4]
            return
        opened = _open_entry(folder, name, rel, result)
        if opened is None:
            result.files.pop(rel, None)
            return
        fd, st = opened
        try:
            if stat.S_ISDIR(st.st_mode):
                result.files.pop(rel, None)
                subfolders.append(name)
            elif stat.S_ISREG(st.st_mode):
                self._hash(fd, rel, st, result, into)
            else:
                result.files.pop(rel, None)
                result.skipped.append(rel)
        finally:
            os.close(fd)

    def _hash(self, fd: int, rel: str, st: os.stat_result, result: ScanResult, into: dict[str, StatEntry]) -> None:
        """Store the open file's content. A file written to while we read it is read again (a
        blob is then a state the file really had); one that never holds still is recorded as read
        but left out of the stat cache, so the next snapshot reads it again."""
        self._spend(0, st.st_size)
        sha = ""
        for _ in range(RETRIES):
            sha = self.blobs.put_fd(fd)
            after = os.fstat(fd)
            if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                into[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha)
                break
            st = after
        else:
            into.pop(rel, None)
        result.hashed += 1
        result.files[rel] = sha
        self._cache_changed = True
        self.unsaved_bytes += st.st_size

    # -- writing the directory -----------------------------------------------------------------

    def materialize(self, current: Files, target: Files) -> None:
        """Make the directory (which holds ``current``) hold exactly ``target`` (see materialize.py)."""
        materialize.apply(self, current, target)

    def changed(self) -> None:
        """The stat cache differs from the saved one (materialize.py updates it in place)."""
        self._cache_changed = True


def remove_leftovers(root: str | os.PathLike[str]) -> list[str]:
    """Remove our own transient files (``_ignored``) that a killed run left in the folder, where a
    user or a tool would see them; returns their paths. Only with the chat's lock held, when no
    write of ours can be under way."""
    removed: list[str] = []
    # fwalk's folder descriptors: a folder swapped for a link mid-walk cannot take a removal outside.
    for directory, dirs, names, dir_fd in os.fwalk(root):
        for name in [*names, *dirs]:
            if _ignored(name):
                nofollow.remove_at(dir_fd, name)
                removed.append(os.path.relpath(os.path.join(directory, name), root))
        dirs[:] = [d for d in dirs if not _ignored(d)]
    return removed


def _ignored(name: str) -> bool:
    """Our own transient files: sync cookies and half-written temp files."""
    return name.startswith(COOKIE_PREFIX) or name.endswith(TMP_SUFFIX)


def _below(rel: str, folders: set[str]) -> bool:
    """Whether ``rel`` is under one of ``folders``."""
    while rel:
        rel = rel.rpartition("/")[0]
        if rel in folders:
            return True
    return False


def is_utf8(name: str) -> bool:
    """Whether a name from the file system is valid UTF-8 (else it holds surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(rel: str) -> str:
    """A name that is not valid UTF-8, readable and unambiguous: each bad byte as \\xNN."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _open_entry(folder: int, name: str, rel: str, result: ScanResult) -> tuple[int, os.stat_result] | None:
    """Open ``name`` in ``folder`` for reading, never through a link: (descriptor, its fstat),
    or None when it is gone (or a link, or unreadable: noted in ``result``)."""
    try:
        fd = os.open(name, _OPEN_READ, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS or exc.errno == errno.ENXIO:  # a link, or a socket, by now
            result.skipped.append(rel)
        else:
            log.warning("cannot read %s in a workspace: %s", shown_name(rel), exc.strerror)
            result.unversioned.append(shown_name(rel))
        return None
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


class _Folders:
    """The folders above the paths a rescan visits, each opened from its parent with O_NOFOLLOW.
    Paths come in sorted order, so only the current chain is kept open."""

    def __init__(self, root: int) -> None:
        self._chain: list[tuple[str, int]] = [("", root)]  # (folder, descriptor; -1: not a folder)

    def open(self, rel: str) -> int | None:
        chain = self._chain
        while len(chain) > 1 and not (rel == chain[-1][0] or rel.startswith(chain[-1][0] + "/")):
            fd = chain.pop()[1]
            if fd >= 0:
                os.close(fd)
        while chain[-1][0] != rel:
            folder, fd = chain[-1]
            if fd < 0:
                return None
            depth = folder.count("/") + 1 if folder else 0
            child = "/".join(rel.split("/")[: depth + 1])
            try:
                fd = os.open(child.rpartition("/")[2], _OPEN_DIR, dir_fd=fd)
            except OSError:  # gone, or a file or a link now: nothing under it is in the workspace
                fd = -1
            chain.append((child, fd))
        fd = chain[-1][1]
        return fd if fd >= 0 else None

    def close(self) -> None:
        for _, fd in self._chain:
            if fd >= 0:
                os.close(fd)
        self._chain = []


def _directories(files: Files) -> set[str]:
    dirs: set[str] = set()
    for path in files:
        d = path.rpartition("/")[0]
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition("/")[0]
    return dirs


def _drop(files: Files, cache: dict[str, StatEntry], rel: str, *, keep_self: bool = False) -> None:
    if not keep_self:
        files.pop(rel, None)
        cache.pop(rel, None)
    under = rel + "/"
    for key in [k for k in files if k.startswith(under)]:
        del files[key]
        cache.pop(key, None)

