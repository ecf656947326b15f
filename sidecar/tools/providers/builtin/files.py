"""write_file, read_file, list_files and delete_file on the chat's workspace folder.

Paths come from a model and are hostile: each is checked (no absolute paths, '..', NUL) and
resolved so that no symbolic link leads out of the workspace.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import anyio.to_thread

from ....workspace import nofollow
from ....workspace.nofollow import TMP_SUFFIX
from ....workspace.paths import PathRejected, check, check_new, inside
from ....workspace.tree import is_utf8, shown_name
from . import Builtin, BuiltinCall, BuiltinError

READ_LIMIT = 256 << 10
MAX_READ_LIMIT = 8 << 20
LIST_LIMIT = 1000

_PATH = {"type": "string", "description": "Path relative to the workspace, '/'-separated"}


def _target(call: BuiltinCall, path: str) -> Path:
    try:
        return inside(call.workspace, path)
    except PathRejected as exc:
        raise BuiltinError(f"{path!r}: {exc}") from None


def _checked(path: str, *, new: bool = False) -> str:
    """``new``: a path about to be written, so not a name the sidecar keeps for itself."""
    try:
        return check_new(path) if new else check(path)
    except PathRejected as exc:
        raise BuiltinError(f"{path!r}: {exc}") from None


async def write_file(call: BuiltinCall) -> dict[str, Any]:
    path, content = call.args["path"], call.args["content"]
    data = base64.b64decode(content) if call.args.get("encoding") == "base64" else content.encode()
    rel = _checked(path, new=True)

    def write() -> bool:
        try:  # through folder descriptors, never a link (see workspace.nofollow)
            return nofollow.write_file(call.workspace, rel, data)
        except PathRejected as exc:
            raise BuiltinError(str(exc)) from None

    created = await _fs(write)
    return {"path": path, "size": len(data), "created": created}


async def read_file(call: BuiltinCall) -> dict[str, Any]:
    path = call.args["path"]
    offset = call.args.get("offset", 0)
    limit = min(call.args.get("limit", READ_LIMIT), MAX_READ_LIMIT)
    target = _target(call, path)

    def read() -> tuple[bytes, int]:
        if not target.is_file() or target.is_symlink():
            raise BuiltinError(f"{path!r} is not a file in the workspace; list_files shows what is there")
        with open(target, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            return f.read(limit), size

    data, size = await _fs(read)
    out: dict[str, Any] = {"path": path, "size": size, "offset": offset,
                           "truncated": offset + len(data) < size}
    try:
        out["content"], out["encoding"] = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        out["content"], out["encoding"] = base64.b64encode(data).decode("ascii"), "base64"
    return out


async def list_files(call: BuiltinCall) -> dict[str, Any]:
    prefix = call.args.get("path") or ""
    base = _target(call, prefix) if prefix else call.workspace

    def rel(full: str) -> str:
        return os.path.relpath(full, call.workspace).replace(os.sep, "/")

    # Names that are not valid UTF-8 are left out as the workspace's versions leave them out
    # (they cannot travel in JSON), and named with \xNN escapes so the model knows they are there.
    unversioned: list[str] = []

    def walk() -> list[tuple[str, int]]:
        if not base.is_dir() or base.is_symlink():
            raise BuiltinError(f"{prefix!r} is not a folder in the workspace")
        found: list[tuple[str, int]] = []
        for directory, dirs, names in os.walk(base):
            unversioned.extend(shown_name(rel(os.path.join(directory, d))) for d in dirs if not is_utf8(d))
            dirs[:] = sorted(d for d in dirs if is_utf8(d) and not os.path.islink(os.path.join(directory, d)))
            for name in sorted(names):
                full = os.path.join(directory, name)
                if not is_utf8(name):
                    unversioned.append(shown_name(rel(full)))
                    continue
                if name.endswith(TMP_SUFFIX):
                    continue
                try:
                    st = os.lstat(full)
                except OSError:  # gone since the folder was listed
                    continue
                if stat.S_ISLNK(st.st_mode):
                    continue
                found.append((rel(full), st.st_size))
                if len(found) > LIST_LIMIT:
                    return found
        return found

    found = await _fs(walk)
    truncated = len(found) > LIST_LIMIT
    found = found[:LIST_LIMIT]
    listing = "\n".join(f"- `{p}` ({size} bytes)" for p, size in found) or "(no files)"
    if truncated:
        listing += f"\n\n(only the first {LIST_LIMIT} files are listed)"
    if unversioned:
        listing += ("\n\n(left out, their names are not valid UTF-8: "
                    + ", ".join(f"`{p}`" for p in sorted(unversioned)) + ")")
    return {"files": [{"path": p, "size": size} for p, size in found], "count": len(found),
            "truncated": truncated, "listing": listing}


async def delete_file(call: BuiltinCall) -> dict[str, Any]:
    path = call.args["path"]
    rel = _checked(path)

    def delete() -> str:
        try:  # a link on the way is refused; a link at the path is removed, never its target
            kind = nofollow.delete(call.workspace, rel)
        except PathRejected as exc:
            raise BuiltinError(str(exc)) from None
        if kind is None:
            raise BuiltinError(f"{path!r} does not exist in the workspace")
        return "folder" if kind == "folder" else "file"

    kind = await _fs(delete)
    return {"path": path, "deleted": kind, "message": f"Deleted the {kind} `{path}`."}


async def _fs(fn: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(fn)
    except OSError as exc:
        raise BuiltinError(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) from None


TOOLS = (
    Builtin(
        "write_file", "Write File",
        "Create or overwrite a file in the chat's workspace (folders are created as needed).",
        {"type": "object", "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The whole new content of the file"},
            "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8",
                         "description": "How content is encoded: text, or base64 for binary files"},
        }, "required": ["path", "content"], "additionalProperties": False},
        write_file, "code", {"file": "$args.path", "language": "auto", "editable": True},
    ),
    Builtin(
        "read_file", "Read File",
        "Read a file from the chat's workspace (text as UTF-8, other files as base64).",
        {"type": "object", "properties": {
            "path": _PATH,
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Byte to start at"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_LIMIT, "default": READ_LIMIT,
                      "description": "Most bytes to return"},
        }, "required": ["path"], "additionalProperties": False},
        read_file, "code", {"file": "$args.path", "language": "auto"},
    ),
    Builtin(
        "list_files", "List Files",
        "List the files in the chat's workspace, or under one of its folders, with their sizes.",
        {"type": "object", "properties": {
            "path": {"type": "string", "description": "Folder to list, relative to the workspace (default: all)"},
        }, "additionalProperties": False},
        list_files, "document", {"content": "$return.listing"},
    ),
    Builtin(
        "delete_file", "Delete File",
        "Delete a file or a folder (with everything in it) from the chat's workspace.",
        {"type": "object", "properties": {"path": _PATH}, "required": ["path"], "additionalProperties": False},
        delete_file, "document", {"content": "$return.message"},
    ),
)
