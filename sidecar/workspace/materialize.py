"""Materialise: turn a chat's working directory from one files map into another, touching only
what differs (a branch switch, a restore, a fresh workspace).

Every write goes through folder descriptors opened without following links (see ``nofollow``):
a link standing where the target has a file or folder is replaced, never written through,
whatever a tool changes while this runs. Blocking; run on a worker thread under the chat's lock.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import PathRejected
from . import nofollow
from .blobs import BlobStore, MissingBlob

if TYPE_CHECKING:
    from .tree import Files, Tree

PARALLEL_FROM = 32  # files; below this a thread pool costs more than it saves
COPY_THREADS = 4


def apply(tree: Tree, current: Files, target: Files) -> None:
    """Make ``tree``'s directory (which holds ``current``) hold exactly ``target``, keeping its
    stat cache up to date."""
    tree.root.mkdir(parents=True, exist_ok=True)
    cache = tree.cache
    removed = current.keys() - target.keys()
    todo = [(rel, sha) for rel, sha in target.items() if current.get(rel) != sha]
    if not todo and not removed:
        return
    root_fd = nofollow.open_root(tree.root)
    try:
        if removed:
            _remove(root_fd, removed)
            for rel in removed:
                cache.pop(rel, None)
            tree.changed()
        if todo:
            _write(tree, root_fd, todo, current)
    finally:
        os.close(root_fd)


def _write(tree: Tree, root_fd: int, todo: list[tuple[str, str]], current: Files) -> None:
    # One job per folder, so each folder is opened (or made) once and its files are created
    # relative to it: no path is resolved per file, and none through a link.
    by_dir: dict[str, list[tuple[str, str, str]]] = {}
    for rel, sha in todo:
        head, _, name = rel.rpartition("/")
        by_dir.setdefault(head, []).append((name, rel, sha))
    dirs = sorted(by_dir)  # parents before children: a walk keeps the open ancestors on a stack
    try:
        blobs_fd = os.open(tree.blobs.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except FileNotFoundError:
        raise MissingBlob(todo[0][1], tree.blobs.path(todo[0][1])) from None
    try:
        def write(part: list[str]) -> list[tuple[str, os.stat_result, str]]:
            return _write_dirs(root_fd, blobs_fd, tree.blobs, part, by_dir, current)

        # File system calls release the GIL: a few threads overlap their waits (git checks
        # out one file at a time). One run of neighbouring folders per thread keeps the
        # pool's own overhead and the re-opening of shared ancestors small.
        if len(todo) >= PARALLEL_FROM and len(dirs) > 1:
            with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="materialize") as pool:
                written = [w for part in pool.map(write, _split(dirs, by_dir, COPY_THREADS)) for w in part]
        else:
            written = write(dirs)
    finally:
        os.close(blobs_fd)
    cache = tree.cache
    for rel, st, sha in written:
        cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha)
    tree.changed()

def _remove(root_fd: int, removed: set[str]) -> None:
    """Delete files, then the folders that left empty, walking up towards the root. A folder
    on the way that is gone or is now a link holds nothing of ours: it is left alone."""
    by_dir: dict[str, list[str]] = {}
    for rel in removed:
        head, _, name = rel.rpartition("/")
        by_dir.setdefault(head, []).append(name)
    for head, names in by_dir.items():
        try:
            fd = nofollow.open_dir(root_fd, head)
        except (FileNotFoundError, PathRejected):
            continue
        try:
            for name in names:
                nofollow.remove_at(fd, name)
        finally:
            os.close(fd)
    for rel in sorted(by_dir, key=len, reverse=True):
        while rel:
            head, _, name = rel.rpartition("/")
            try:
                fd = nofollow.open_dir(root_fd, head)
            except (OSError, PathRejected):
                break
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                break  # not empty (or already gone, or a link): stop climbing
            finally:
                os.close(fd)
            rel = head


def _split(dirs: list[str], by_dir: dict[str, list[tuple[str, str, str]]], parts: int) -> list[list[str]]:
    """``dirs`` (sorted) cut into ``parts`` runs holding about as many files each."""
    total = sum(len(by_dir[d]) for d in dirs)
    out: list[list[str]] = [[]]
    filled = 0
    for d in dirs:
        if filled >= total * len(out) / parts and len(out) < parts:
            out.append([])
        out[-1].append(d)
        filled += len(by_dir[d])
    return out


def _write_dirs(
    root_fd: int, blobs_fd: int, blobs: BlobStore, dirs: list[str],
    by_dir: dict[str, list[tuple[str, str, str]]], current: Files,
) -> list[tuple[str, os.stat_result, str]]:
    """Write the files of ``dirs`` (sorted), walking folders with a stack of open descriptors."""
    done: list[tuple[str, os.stat_result, str]] = []
    # (folder, descriptor, made by us): in a folder we made, nothing can stand in the way yet.
    stack: list[tuple[str, int, bool]] = [("", os.dup(root_fd), False)]
    try:
        for directory in dirs:
            while stack[-1][0] and not directory.startswith(stack[-1][0] + "/") and directory != stack[-1][0]:
                os.close(stack.pop()[1])
            top, fd, made = stack[-1]
            if directory != top:
                for part in (directory[len(top) + 1:] if top else directory).split("/"):
                    shown = f"{top}/{part}" if top else part
                    if made:
                        fd, made = nofollow.make_dir(fd, part, shown)
                    else:
                        fd, made = nofollow.step_made(fd, part, shown, create=True, clear=True)
                    stack.append((shown, fd, made))
                    top = shown
            for name, rel, sha in by_dir[directory]:
                done.append((rel, _copy(blobs_fd, blobs, sha, fd, name, rel in current), sha))
    finally:
        for _, fd, _ in stack:
            os.close(fd)
    return done


def _copy(blobs_fd: int, blobs: BlobStore, sha256: str, dir_fd: int, name: str, existing: bool) -> os.stat_result:
    """Copy a blob to ``name`` in folder ``dir_fd`` (a real copy, never a hard link: a tool editing
    the file would edit the blob) and return the new file's stat. A file the directory held
    (``existing``) is replaced atomically; a new name is created, and whatever stands there
    instead (an untracked file, a link, a folder) is replaced, a link never followed."""
    try:
        src = os.open(f"{sha256[:2]}/{sha256}", os.O_RDONLY, dir_fd=blobs_fd)
    except FileNotFoundError:
        raise MissingBlob(sha256, blobs.path(sha256)) from None
    try:
        if not existing:
            try:
                return nofollow.create_at(dir_fd, name, lambda fd: _copy_into(src, fd))
            except FileExistsError:
                pass
        try:
            return nofollow.replace_at(dir_fd, name, lambda fd: _copy_into(src, fd))
        except IsADirectoryError:  # a folder where the version has a file
            nofollow.remove_at(dir_fd, name)
            return nofollow.create_at(dir_fd, name, lambda fd: _copy_into(src, fd))
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
