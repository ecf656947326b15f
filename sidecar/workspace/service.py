"""The workspace service: the file API (list, read, write, upload, diff, clean up) that handlers
and turns call, over the versioning core (``versions.py``: manifests, materialise, one lock per
chat) and the follower of outside edits (``outside_edits.py``).
"""

from __future__ import annotations

import base64
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..errors import InvalidParams, NotFound
from ..store.manifests import ManifestRow
from . import nofollow, paths
from .outside_edits import Changes
from .tree import diff
from .versions import ChatWorkspace, Versions

__all__ = ["ChatWorkspace", "FileContent", "FileInfo", "WorkspaceService", "encode_content"]

DEFAULT_READ_LIMIT = 8 << 20
MAX_READ_LIMIT = 48 << 20  # base64 of this still fits the 64 MiB line cap


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
        rel = _checked(path)
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
        self, chat_id: str, sources: list[str], dest: str
    ) -> tuple[ManifestRow, list[str], list[str]] | None:
        """Copy files in; returns (manifest, added, modified), or None when nothing changed."""
        dest_rel = _checked(dest) if dest else ""
        checked: list[Path] = []
        for i, source in enumerate(sources):
            p = Path(source)
            if not p.is_absolute():
                raise InvalidParams(f"params.paths[{i}]", "must be an absolute path on this machine")
            if not await anyio.Path(p).exists():
                raise InvalidParams(f"params.paths[{i}]", f"{source} does not exist")
            if p.name in ("", ".."):  # "/" or "/a/.." would be copied as the destination itself
                raise InvalidParams(f"params.paths[{i}]", f"{source} has no name to copy it under; pick a "
                                    "file or folder inside it")
            checked.append(p)
        await self.run(self._refuse_own_folders, checked, self.workspace_path(chat_id) / dest_rel)
        async with self.locked(chat_id) as (ws, chat):
            await self.capture(ws, chat)
            try:
                base = paths.inside(ws.tree.root, dest_rel) if dest_rel else ws.tree.root
            except paths.PathRejected as exc:
                raise InvalidParams("params.dest", str(exc)) from None
            before = ws.active_files
            await self.run(_copy_in, checked, base)
            manifest = await self.capture(ws, chat, "user_upload", None)
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

            def sweep() -> tuple[int, int]:
                removed = freed = 0
                for sha in ws.blobs.all_shas():
                    if sha not in referenced:
                        freed += ws.blobs.remove(sha)
                        removed += 1
                shutil.rmtree(ws.blobs.root / "tmp", ignore_errors=True)  # crashed writes
                return removed, freed

            return await self.run(sweep)


def _checked(path: str) -> str:
    try:
        return paths.check(path)
    except paths.PathRejected as exc:
        raise InvalidParams("params.path", str(exc)) from None


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


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
