"""Content-addressed blobs: ``<chat>/blobs/ab/<sha256>``, written to a temp file and renamed in,
hashed while streaming so a file of any size never sits in memory."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import MissingBlob

CHUNK = 1 << 20


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._tmp = root / "tmp"
        self._made: set[str] = set()

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return os.path.exists(self.path(sha256))

    def require(self, sha256: str) -> Path:
        path = self.path(sha256)
        if not os.path.exists(path):
            raise MissingBlob(sha256, path)
        return path

    def _temp(self) -> tuple[int, str]:
        try:
            return tempfile.mkstemp(dir=self._tmp)
        except FileNotFoundError:  # the first blob, or gc removed the folder: made then, not every time
            self._tmp.mkdir(parents=True, exist_ok=True)
            return tempfile.mkstemp(dir=self._tmp)

    def _commit(self, tmp_name: str, sha256: str) -> None:
        shard = sha256[:2]
        if shard not in self._made:
            (self.root / shard).mkdir(parents=True, exist_ok=True)
            self._made.add(shard)
        final = self.path(sha256)
        if os.path.exists(final):
            os.unlink(tmp_name)  # same content already stored
        else:
            os.chmod(tmp_name, 0o444)  # blobs never change; a stray write should fail
            os.replace(tmp_name, final)

    def put_file(self, source: Path | str) -> tuple[str, int]:
        """Copy ``source`` in, hashing as it streams. Returns (sha256, size)."""
        with open(source, "rb") as src:
            return self._put_chunks(iter(lambda: src.read(CHUNK), b""))

    def put_fd(self, fd: int) -> str:
        """Copy in the whole of an open file (from its start, whatever its offset), hashing as it
        streams. The caller opened it, so nothing here can be led elsewhere by a link. A file of
        less than a chunk is read whole first: when its content is stored already (a file written
        again with what it held), no temp file is made, and making one costs 0.1-0.3 ms here."""
        first = os.pread(fd, CHUNK, 0)
        if len(first) < CHUNK and not os.pread(fd, 1, len(first)):
            return self.put_bytes(first)

        def chunks() -> Iterator[bytes]:
            offset = 0
            while chunk := first if not offset else os.pread(fd, CHUNK, offset):
                offset += len(chunk)
                yield chunk

        return self._put_chunks(chunks())[0]

    def _put_chunks(self, chunks: Iterator[bytes]) -> tuple[str, int]:
        digest = hashlib.sha256()
        size = 0
        tmp_fd, tmp_name = self._temp()
        try:
            with os.fdopen(tmp_fd, "wb") as dst:
                for chunk in chunks:
                    digest.update(chunk)
                    dst.write(chunk)
                    size += len(chunk)
            sha = digest.hexdigest()
            self._commit(tmp_name, sha)
        except BaseException:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
            raise
        return sha, size

    def put_bytes(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        if not self.exists(sha):
            fd, tmp_name = self._temp()
            try:
                with os.fdopen(fd, "wb") as dst:
                    dst.write(data)
                self._commit(tmp_name, sha)
            except BaseException:
                if os.path.exists(tmp_name):
                    os.unlink(tmp_name)
                raise
        return sha

    def size(self, sha256: str) -> int:
        return os.stat(self.require(sha256)).st_size

    def all_shas(self) -> list[str]:
        found: list[str] = []
        if not self.root.exists():
            return found
        for shard in os.scandir(self.root):
            if shard.is_dir(follow_symlinks=False) and len(shard.name) == 2:
                found += [e.name for e in os.scandir(shard.path) if len(e.name) == 64]
        return found

    def remove(self, sha256: str) -> int:
        path = self.path(sha256)
        try:
            size = os.stat(path).st_size
            os.unlink(path)
        except FileNotFoundError:
            return 0
        return size

    def put_stream(self, read: Callable[[int], bytes], on_chunk: Callable[[bytes], None]) -> tuple[str, int]:
        """Store what ``read`` returns until it returns nothing, hashing as it streams. ``on_chunk``
        gets each chunk once it is written (to copy it elsewhere too) and may raise to abandon the
        blob (nothing is left behind). Returns (sha256, size)."""
        def chunks() -> Iterator[bytes]:
            while chunk := read(CHUNK):
                yield chunk
                on_chunk(chunk)  # back here once _put_chunks has hashed and written it

        return self._put_chunks(chunks())
