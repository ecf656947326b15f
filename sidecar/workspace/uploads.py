"""An upload's copy: files from this machine into a chat's blob store, done outside the chat's lock
(the lock is taken only to put the copied files in place; see ``WorkspaceService.upload``).

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
import stat
import threading
from dataclasses import dataclass, field
from functools import cache

from ..errors import InvalidParams, PathRejected
from . import paths
from .blobs import BlobStore

# O_NONBLOCK: opening a FIFO that was swapped in after the lstat must not wait for a writer.
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
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


@dataclass(eq=False)  # one object per upload, kept in a set
class UploadCopy:
    sources: list[str]  # absolute paths, checked for shape by the caller
    dest: str  # checked workspace folder ("" for the root)
    blobs: BlobStore
    limit: int  # bytes, for the whole upload
    stop: threading.Event = field(default_factory=threading.Event)
    total: int = 0  # bytes the planned files said they hold
    done: int = 0  # bytes copied so far
    shas: set[str] = field(default_factory=lambda: set[str]())  # blobs written, kept by gc until committed
    skipped: list[str] = field(default_factory=lambda: list[str]())  # links inside uploaded folders

    def run(self) -> dict[str, str]:
        """Copy every file in; returns {workspace path: sha256}."""
        return self.copy(self.plan())

    def copy(self, planned: list[Planned]) -> dict[str, str]:
        if self.total > self.limit:
            raise InvalidParams("params.paths", f"the upload holds {self.total} bytes, over the limit of "
                                f"{self.limit} bytes for one upload (--max-upload-bytes); upload less at once")
        files: dict[str, str] = {}
        for item in planned:
            if self.stop.is_set():
                raise Stopped
            files[item.rel] = self._copy(item)
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

    def _copy(self, item: Planned) -> str:
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

            def read(n: int) -> bytes:
                try:
                    return os.read(fd, n)
                except OSError as exc:  # the source's fault (an I/O error, a vanished mount), not the store's
                    raise InvalidParams(f"params.paths[{item.index}]", f"{item.source} cannot be read: "
                                        f"{exc.strerror}") from None

            sha, _ = self.blobs.put_stream(read, self._count)
        finally:
            os.close(fd)
        self.shas.add(sha)
        return sha

    def _count(self, n: int) -> None:
        """Called after each chunk: the limit and a cancel take effect here."""
        self.done += n
        if self.done > self.limit:
            raise InvalidParams("params.paths", f"the upload grew past the limit of {self.limit} bytes for one "
                                "upload (--max-upload-bytes) while it was copied; upload less at once")
        if self.stop.is_set():
            raise Stopped


@cache
def _pseudo_devices() -> frozenset[int]:
    devices: set[int] = set()
    for root in _PSEUDO_ROOTS:
        try:
            devices.add(os.stat(root).st_dev)
        except OSError:
            pass
    return frozenset(devices)
