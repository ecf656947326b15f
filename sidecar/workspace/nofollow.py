"""Writes into a workspace that no symbolic link can redirect.

A workspace holds whatever tools and editors put there, links included, and any of them may change
while we work. So nothing here resolves a path string: every folder on the way is opened from the
workspace root's descriptor one component at a time with ``O_NOFOLLOW|O_DIRECTORY`` (a link or a file
at a component is met, never followed), a file is created relative to its folder's descriptor with
``O_CREAT|O_EXCL|O_NOFOLLOW``, and an existing file is replaced by renaming a temporary file with an
unpredictable name, in the same folder, over it (``renameat`` through ``dir_fd``). Swapping a folder
for a link between a check and a write changes nothing: the write lands in the folder we opened.

Links are not versioned (a snapshot skips them) and never followed for writing: a write whose path
is or passes through one is refused (``PathRejected``); materialise, which must make the folder hold
a version, removes a link standing where the version has a file or folder (the link, not its target).
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

from ..errors import PathRejected

T = TypeVar("T")

TMP_SUFFIX = ".sidecar-tmp"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; the guard keeps the module importable elsewhere
# (os.open descriptors are already close-on-exec: a tool's subprocess never inherits one.)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
# What opening a link (O_NOFOLLOW) or a file (O_DIRECTORY) as a folder fails with; FreeBSD says EMLINK.
_NOT_A_DIR = {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}


def temp_name() -> str:
    """A name nobody can guess ahead (so nobody can plant a link there), short enough that any
    legal file name still has a temporary sibling, ending in the suffix snapshots skip."""
    return f".{secrets.token_hex(8)}{TMP_SUFFIX}"


def open_root(root: str | os.PathLike[str]) -> int:
    """The workspace folder itself, refused if it is a link."""
    return os.open(root, _DIR)


def open_dir(root_fd: int, rel_dir: str, *, create: bool = False, clear: bool = False) -> int:
    """A new descriptor of ``rel_dir`` ('' is the root) under ``root_fd``, each component opened
    without following a link. ``create``: missing folders are made. ``clear``: a link or file
    standing at a component is removed first (materialise); otherwise it is ``PathRejected``.
    A missing folder without ``create`` is ``FileNotFoundError``."""
    fd = os.dup(root_fd)
    if not rel_dir:
        return fd
    shown = ""
    try:
        for part in rel_dir.split("/"):
            shown = f"{shown}/{part}" if shown else part
            child = step(fd, part, shown, create=create, clear=clear)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def step(fd: int, part: str, shown: str, *, create: bool, clear: bool) -> int:
    """Open (or make) the folder ``part`` inside the folder ``fd``; see ``open_dir``."""
    return step_made(fd, part, shown, create=create, clear=clear)[0]


def step_made(fd: int, part: str, shown: str, *, create: bool, clear: bool) -> tuple[int, bool]:
    """``step``, and whether this call made the folder (so nothing can stand in its way yet)."""
    try:
        return os.open(part, _DIR, dir_fd=fd), False
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno not in _NOT_A_DIR:
            raise
        if not clear:
            raise PathRejected(_in_the_way(fd, part, shown)) from None
        with suppress(FileNotFoundError):
            os.unlink(part, dir_fd=fd)  # the link itself, never what it points at
    return make_dir(fd, part, shown)


def make_dir(fd: int, part: str, shown: str) -> tuple[int, bool]:
    """Make the folder ``part`` inside ``fd`` and open it: for a folder most likely missing (its
    parent was just made), mkdir first saves a failed open. Returns (descriptor, whether this
    call made it)."""
    try:
        os.mkdir(part, 0o777, dir_fd=fd)
    except FileExistsError:  # another copy thread made it first, or something stands there
        return step_made(fd, part, shown, create=False, clear=True)[0], False
    return os.open(part, _DIR, dir_fd=fd), True  # a link planted since is still refused here


def kind_at(fd: int, name: str) -> str | None:
    """'file', 'folder', 'link' or 'special' for what is at ``name`` in folder ``fd``; None if nothing."""
    try:
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "special"


def _in_the_way(fd: int, part: str, shown: str) -> str:
    what = {"link": "a symbolic link", "file": "a file"}.get(kind_at(fd, part) or "", "not a folder")
    if what == "a symbolic link":
        return (f"{shown!r} is a symbolic link; the workspace never writes through links: "
                "use a path without it, or delete the link first")
    return f"{shown!r} is {what}, not a folder: pick another path or delete it first"


def create_at(dir_fd: int, name: str, fill: Callable[[int], T]) -> T:
    """Create ``name`` (nothing may be there, not even a link) and ``fill`` it through its descriptor."""
    fd = os.open(name, CREATE, 0o644, dir_fd=dir_fd)
    try:
        return fill(fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    finally:
        os.close(fd)


def replace_at(dir_fd: int, name: str, fill: Callable[[int], T]) -> T:
    """Replace ``name`` atomically (an editor holding it sees the old file or the new one): ``fill``
    writes a fresh temporary file in the same folder, which is then renamed over ``name``. A link
    at ``name`` is replaced, not followed; a folder there is ``IsADirectoryError``."""
    tmp = temp_name()
    fd = os.open(tmp, CREATE, 0o644, dir_fd=dir_fd)
    try:
        try:
            result = fill(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return result


def remove_at(dir_fd: int, name: str) -> None:
    """Remove whatever is at ``name`` (a folder with all it holds; a link, not its target)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):  # Linux says EISDIR for a folder, POSIX EPERM
        if kind_at(dir_fd, name) != "folder":
            raise
        shutil.rmtree(name, dir_fd=dir_fd)  # fd-based where the platform allows: links never followed


def write_bytes(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(root: Path | str, rel: str, data: bytes) -> bool:
    """Write ``data`` to the checked workspace path ``rel``, making its folders; True if the file is
    new. ``PathRejected`` when ``rel`` is, or passes through, a link, a file or a folder in the way."""
    head, _, name = rel.rpartition("/")
    root_fd = open_root(root)
    try:
        dir_fd = open_dir(root_fd, head, create=True)
    finally:
        os.close(root_fd)
    try:
        found = kind_at(dir_fd, name)
        if found == "link":
            raise PathRejected(f"{rel!r} is a symbolic link; the workspace never writes through links: "
                               "delete the link first or write to another name")
        if found in ("folder", "special"):
            raise PathRejected(f"{rel!r} is a {'directory' if found == 'folder' else 'special file'}; "
                               "write to a file path")
        replace_at(dir_fd, name, lambda fd: write_bytes(fd, data))
        return found is None
    finally:
        os.close(dir_fd)


def delete(root: Path | str, rel: str) -> str | None:
    """Remove the checked workspace path ``rel`` without following a link on the way: 'file',
    'folder' or 'link' for what was removed, None when nothing was there."""
    head, _, name = rel.rpartition("/")
    root_fd = open_root(root)
    try:
        try:
            dir_fd = open_dir(root_fd, head)
        except FileNotFoundError:
            return None
    finally:
        os.close(root_fd)
    try:
        found = kind_at(dir_fd, name)
        if found is not None:
            remove_at(dir_fd, name)
        return found
    finally:
        os.close(dir_fd)
