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
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from .blobs import BlobStore

log = logging.getLogger("sidecar.workspace")

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
        tmp = self._cache_path.with_suffix(".tmp")
        tmp.write_bytes(_encode_cache(self.cache))
        os.replace(tmp, self._cache_path)

    def _remember(self, rel: str, st: os.stat_result, sha256: str) -> None:
        self.cache[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha256)

    # -- reading the directory -----------------------------------------------------------------

    def scan(self) -> ScanResult:
        self.root.mkdir(parents=True, exist_ok=True)
        get_known = self.cache.get
        fresh: dict[str, StatEntry] = {}
        result = ScanResult(files={})
        files = result.files
        put_file = self.blobs.put_file
        stack = [("", str(self.root))]
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
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        result.skipped.append(rel)  # symlinks, fifos, sockets: never followed
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed while we looked
                    known = get_known(rel)
                    if (
                        known is not None
                        and known[1] == st.st_mtime_ns
                        and known[0] == st.st_size
                        and known[2] == st.st_ctime_ns
                        and known[3] == st.st_ino
                    ):
                        fresh[rel] = known
                        files[rel] = known[4]
                        continue
                    try:
                        sha, _ = put_file(entry.path)
                    except FileNotFoundError:
                        continue
                    result.hashed += 1
                    files[rel] = sha
                    fresh[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha)
        self._cache = fresh
        return result

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
        for rel, sha in target.items():
            if current.get(rel) == sha:
                continue
            source = self.blobs.require(sha)
            dest = self.root / rel
            self._make_parents(rel)
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            tmp = dest.with_name(f".{dest.name}.sidecar-tmp")
            _copy(source, tmp)
            os.replace(tmp, dest)
            self._remember(rel, os.stat(dest), sha)

    def _make_parents(self, rel: str) -> None:
        parent = rel.rpartition("/")[0]
        if not parent:
            return
        path = self.root / parent
        if path.is_dir() and not path.is_symlink():
            return
        # A file (or link) where the target needs a directory: the target wins.
        walk = self.root
        for part in parent.split("/"):
            walk = walk / part
            if walk.is_symlink() or (walk.exists() and not walk.is_dir()):
                walk.unlink()
        path.mkdir(parents=True, exist_ok=True)

    def _prune(self, dirs: set[str]) -> None:
        """Remove directories left empty, walking up towards the root."""
        for rel in sorted(dirs, key=len, reverse=True):
            while rel:
                try:
                    os.rmdir(self.root / rel)
                except OSError:
                    break  # not empty (or already gone): stop climbing
                rel = rel.rpartition("/")[0]

    def remove_empty_dirs(self) -> None:
        """Drop every empty directory: a manifest holds files only, so none survives a switch."""
        for dirpath, dirnames, filenames in os.walk(self.root, topdown=False):
            if dirpath != str(self.root) and not dirnames and not filenames:
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(path)


def _copy(source: Path, dest: Path) -> None:
    """A real copy (never a hard link: a tool editing the file would edit the blob)."""
    with open(source, "rb") as src:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            remaining = os.fstat(src.fileno()).st_size
            try:
                while remaining > 0:
                    n = os.copy_file_range(src.fileno(), fd, remaining)
                    if n == 0:
                        break
                    remaining -= n
            except (AttributeError, OSError):  # no copy_file_range here: plain copy
                src.seek(0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                with open(fd, "wb", closefd=False) as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        finally:
            os.close(fd)
    if stat.S_IMODE(os.stat(dest).st_mode) != 0o644:
        os.chmod(dest, 0o644)
