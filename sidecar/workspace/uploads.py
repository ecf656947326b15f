"""An upload's copy: files from this machine into a chat's blob store and a private staging folder
next to its workspace, done outside the chat's lock; ``place`` then renames the staged files into
the workspace under the lock, so the chat is held for a rename per file, not for a copy.

Only regular files and folders of them are copied. Every name is looked at with ``lstat`` before
anything is opened, and every file is opened with O_NOFOLLOW|O_NONBLOCK and checked again with
``fstat``: a file swapped for a FIFO, a device or a link in between is refused without blocking on
it. Kernel pseudo files (/proc, /sys) claim to be regular files but are made up as they are read
(``/proc/self/environ`` would copy the sidecar's environment): they are refused by their device.
The size limit counts the bytes actually read, so a file that grows or lies about its size stops
at the limit. The copy runs on a worker thread and looks at ``stop`` between chunks: a cancelled
upload ends within one chunk.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..errors import InvalidParams, PathRejected
from . import nofollow, paths
from .blobs import BlobStore

# O_NONBLOCK: opening a FIFO that was swapped in after the lstat must not wait for a writer.
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_PSEUDO_ROOTS = ("/proc", "/sys")  # Linux; absent elsewhere, and then nothing is refused by device
_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFLNK: "a symbolic link"}


class Stopped(Exception):
    """The upload was cancelled while it copied."""


@dataclass
class Planned:
    index: int  # which params.paths entry it comes from
    source: str  # where it is on this machine
    rel: str  # the workspace path it will have


@dataclass
class Staged:
    sha256: str
    name: str  # in the staging folder
    stat: os.stat_result  # as written: the file is trusted to be unchanged while these match


@dataclass(eq=False)  # one object per upload, kept in a set
class UploadCopy:
    sources: list[str]  # absolute paths, checked for shape by the caller
    dest: str  # checked workspace folder ("" for the root)
    blobs: BlobStore
    staging_root: Path  # the chat's folder for uploads being copied, outside its workspace
    limit: int  # bytes, for the whole upload
    staging: Path | None = None  # this upload's own folder in staging_root, once made
    stop: threading.Event = field(default_factory=threading.Event)
    total: int = 0  # bytes the planned files said they hold
    done: int = 0  # bytes copied so far
    shas: set[str] = field(default_factory=lambda: set[str]())  # blobs written, kept by gc until committed
    skipped: list[str] = field(default_factory=lambda: list[str]())  # links inside uploaded folders
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _finished: bool = False

    def run(self, planned: list[Planned] | None = None) -> dict[str, Staged]:
        """Copy every file in (as ``plan`` finds them, unless given); returns {workspace path: what
        was staged for it}."""
        try:
            return self.copy(self.plan() if planned is None else planned)
        except BaseException:
            self.stop.set()  # nothing of it will be placed: the staging folder goes
            raise
        finally:
            self._finish()

    def copy(self, planned: list[Planned]) -> dict[str, Staged]:
        if self.total > self.limit:
            raise InvalidParams("params.paths", f"the upload holds {self.total} bytes, over the limit of "
                                f"{self.limit} bytes for one upload (--max-upload-bytes); upload less at once")
        self.staging_root.mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(dir=self.staging_root))  # 0700, a fresh random name
        staging_fd = os.open(self.staging, _DIRECTORY)
        files: dict[str, Staged] = {}
        try:
            for n, item in enumerate(planned):
                if self.stop.is_set():
                    raise Stopped
                files[item.rel] = self._copy(item, staging_fd, str(n))
        finally:
            os.close(staging_fd)
        return files

    # -- what will be copied -------------------------------------------------------------------

    def plan(self) -> list[Planned]:
        """Every file to copy, looked at (``lstat``) but not opened; ``total`` is their size."""
        planned: list[Planned] = []
        for i, source in enumerate(self.sources):
            name = os.path.basename(source.rstrip("/")) or source
            # A link the user picked (a file dialog shows them) is followed once, to what it names;
            # links inside a folder are not: they could point anywhere.
            real = os.path.realpath(source)
            if any(real == root or real.startswith(root + "/") for root in _PSEUDO_ROOTS):
                raise InvalidParams(f"params.paths[{i}]", f"{source} is on a kernel pseudo file system "
                                    f"({', '.join(_PSEUDO_ROOTS)}), whose files are generated as they are read: "
                                    "copy what you need to a regular file first")
            st = self._lstat(i, real, source)
            rel = self._rel(i, source, self.dest, name)
            if stat.S_ISDIR(st.st_mode):
                self._walk(i, real, rel, planned)
            else:
                self._refuse_special(i, source, st)
                planned.append(Planned(i, real, rel))
                self.total += st.st_size
        return planned

    def _walk(self, i: int, top: str, top_rel: str, planned: list[Planned]) -> None:
        stack = [(top, top_rel)]
        while stack:
            directory, prefix = stack.pop()
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                raise InvalidParams(f"params.paths[{i}]", f"cannot read the folder {directory}: "
                                    f"{exc.strerror}") from None
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    raise InvalidParams(f"params.paths[{i}]", f"cannot read {entry.path}: {exc.strerror}") from None
                if stat.S_ISLNK(st.st_mode):
                    self.skipped.append(entry.path)
                    continue
                rel = self._rel(i, entry.path, prefix, entry.name)
                if stat.S_ISDIR(st.st_mode):
                    self._refuse_special(i, entry.path, st)  # a pseudo file system's folder
                    stack.append((entry.path, rel))
                else:
                    self._refuse_special(i, entry.path, st)
                    planned.append(Planned(i, entry.path, rel))
                    self.total += st.st_size

    @staticmethod
    def _lstat(i: int, path: str, shown: str) -> os.stat_result:
        try:
            return os.lstat(path)
        except FileNotFoundError:
            raise InvalidParams(f"params.paths[{i}]", f"{shown} does not exist") from None
        except OSError as exc:
            raise InvalidParams(f"params.paths[{i}]", f"cannot read {shown}: {exc.strerror}") from None

    @staticmethod
    def _rel(i: int, source: str, prefix: str, name: str) -> str:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParams(f"params.paths[{i}]", f"the name of {source!r} is not valid UTF-8; rename it "
                                "before uploading it") from None
        try:
            return paths.check_new(f"{prefix}/{name}" if prefix else name)
        except PathRejected as exc:
            raise InvalidParams(f"params.paths[{i}]", f"{source} cannot be uploaded: {exc}") from None

    @staticmethod
    def _refuse_special(i: int, source: str, st: os.stat_result) -> None:
        kind = stat.S_IFMT(st.st_mode)
        if kind not in (stat.S_IFREG, stat.S_IFDIR):
            what = _KINDS.get(kind, "not a regular file")
            raise InvalidParams(f"params.paths[{i}]", f"{source} is {what}: only regular files and folders of "
                                "them can be uploaded")
        if st.st_dev in _pseudo_devices():
            raise InvalidParams(f"params.paths[{i}]", f"{source} is on a kernel pseudo file system "
                                f"({', '.join(_PSEUDO_ROOTS)}), whose files are generated as they are read: "
                                "copy what you need to a regular file first")

    # -- copying -------------------------------------------------------------------------------

    def _copy(self, item: Planned, staging_fd: int, name: str) -> Staged:
        try:
            fd = os.open(item.source, _OPEN)
        except OSError as exc:
            if not os.path.lexists(item.source):
                why = "was removed before it could be copied"
            elif os.path.islink(item.source):
                why = "was replaced by a symbolic link before it could be copied"
            else:
                why = f"cannot be read: {exc.strerror}"
            raise InvalidParams(f"params.paths[{item.index}]", f"{item.source} {why}") from None
        try:
            # The lstat was a look; this is what was opened. A swap in between is caught here.
            self._refuse_special(item.index, item.source, os.fstat(fd))
            out = os.open(name, nofollow.CREATE, 0o644, dir_fd=staging_fd)
            try:
                def read(n: int) -> bytes:
                    try:
                        return os.read(fd, n)
                    except OSError as exc:  # the source's fault (an I/O error, a vanished mount)
                        raise InvalidParams(f"params.paths[{item.index}]", f"{item.source} cannot be read: "
                                            f"{exc.strerror}") from None

                def chunk(data: bytes) -> None:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(out, view):]
                    self._count(len(data))

                sha, _ = self.blobs.put_stream(read, chunk)
                staged = Staged(sha, name, os.fstat(out))
            finally:
                os.close(out)
        finally:
            os.close(fd)
        self.shas.add(sha)
        return staged

    def _count(self, n: int) -> None:
        """Called after each chunk: the limit and a cancel take effect here."""
        self.done += n
        if self.done > self.limit:
            raise InvalidParams("params.paths", f"the upload grew past the limit of {self.limit} bytes for one "
                                "upload (--max-upload-bytes) while it was copied; upload less at once")
        if self.stop.is_set():
            raise Stopped

    # -- the end of an upload ------------------------------------------------------------------

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            remove = self.stop.is_set()
        if remove:
            self._remove_staging()

    def close(self) -> None:
        """The upload is over (put in place, refused or cancelled): remove what is left of its
        staging folder now, or, while the copy still runs, as soon as it stops (blocking)."""
        with self._lock:
            self.stop.set()
            remove = self._finished
        if remove:
            self._remove_staging()

    def _remove_staging(self) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)


def place(root: Path, staging: Path, files: dict[str, Staged]) -> list[tuple[str, os.stat_result, str]]:
    """Move staged files to their workspace paths (blocking; the chat's lock held). Each folder on
    the way is opened from the workspace root one component at a time with O_NOFOLLOW (created
    when missing) and each file renamed in relative to it, so a symbolic link placed anywhere on
    the way is refused, never followed. Returns (path, stat, sha256) of each file still as it was
    staged (a file changed in between is left for the snapshot to hash)."""
    folders: dict[str, int] = {}
    staging_fd = os.open(staging, _DIRECTORY)
    placed: list[tuple[str, os.stat_result, str]] = []
    try:
        folders[""] = nofollow.open_root(root)

        def folder(rel: str) -> int:
            fd = folders.get(rel)
            if fd is None:
                parent, _, name = rel.rpartition("/")
                try:
                    fd = folders[rel] = nofollow.step(folder(parent), name, rel, create=True, clear=False)
                except PathRejected:
                    raise InvalidParams("params.dest", f"{rel!r} in the workspace is a symbolic link or a file, "
                                        "and an upload never writes through one: remove it or upload "
                                        "somewhere else") from None
            return fd

        for rel, item in files.items():
            parent, _, name = rel.rpartition("/")
            parent_fd = folder(parent)
            try:
                os.rename(item.name, name, src_dir_fd=staging_fd, dst_dir_fd=parent_fd)
            except IsADirectoryError:
                raise InvalidParams("params.paths", f"{rel!r} in the workspace is a folder, and the upload has "
                                    "a file of that name: rename or remove the folder, or upload somewhere else"
                                    ) from None
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            was = item.stat  # a rename changes only the ctime
            if (st.st_ino, st.st_size, st.st_mtime_ns) == (was.st_ino, was.st_size, was.st_mtime_ns):
                placed.append((rel, st, item.sha256))
    finally:
        os.close(staging_fd)
        for fd in folders.values():
            os.close(fd)
    return placed


@cache
def _pseudo_devices() -> frozenset[int]:
    devices: set[int] = set()
    for root in _PSEUDO_ROOTS:
        try:
            devices.add(os.stat(root).st_dev)
        except OSError:
            pass
    return frozenset(devices)
