"""Per-chat workspaces: files versioned by manifest."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode

_NF, _ST, _IP = ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR, ErrorCode.INVALID_PARAMS


class FileEntry(Model):
    path: str
    size: int
    sha256: str


class FilesParams(Model):
    chat_id: str
    # Default: the current workspace (outside edits are saved as a new version first).
    manifest_id: str | None = None


class FilesResult(Model):
    files: list[FileEntry]
    manifest_id: str | None = None  # absent while the workspace has never held a file


class ReadFileParams(Model):
    chat_id: str
    path: str
    manifest_id: str | None = None
    max_bytes: int = 8 << 20


class ReadFileResult(Model):
    path: str
    size: int
    sha256: str
    text: str | None = None  # UTF-8 content without NUL bytes
    base64: str | None = None  # anything else


class WriteFileParams(Model):
    chat_id: str
    path: str
    text: str | None = None
    base64: str | None = None


class ManifestIdResult(Model):
    manifest_id: str


class UploadParams(Model):
    chat_id: str
    paths: Annotated[list[str], msgspec.Meta(description=(
        "Absolute paths of regular files or folders on this machine. Links inside folders are skipped; "
        "FIFOs, sockets, devices and kernel pseudo files (/proc, /sys) are refused (InvalidParams naming "
        "the path), as is an upload over the size limit (--max-upload-bytes, counted while copying)."))]
    dest: Annotated[str, msgspec.Meta(description=(
        "Folder inside the workspace to copy into (default: its root). Refused when it is, or passes "
        "through, a symbolic link or a file."))] = ""
    work_done_token: Annotated[int | str | None, msgspec.Meta(description=(
        "Report progress as $/progress under this token: begin, a report about every 250 ms while "
        "copying (percentage, message \"copied N of M bytes\"), end. The copy holds no lock on the "
        "chat; $/cancelRequest stops it within one chunk and leaves the workspace as it was."))] = None


class UploadResult(Model):
    manifest_id: str | None = None  # absent when nothing changed
    added: list[str] = []
    modified: list[str] = []


class ManifestParams(Model):
    chat_id: str
    message_id: str | None = None
    manifest_id: str | None = None


class Manifest(Model):
    id: str
    files: dict[str, str]
    source: Literal["user_upload", "tool_run", "branch", "edit"]
    created_at: str
    parent_id: str | None = None
    source_ref: str | None = None


class ManifestResult(Model):
    manifest: Manifest | None = None  # absent: that point of the chat has no files


class DiffParams(Model):
    chat_id: str
    from_: str = msgspec.field(name="from")
    to: str


class Changes(Model):
    added: list[str]
    removed: list[str]
    modified: list[str]


class GcParams(Model):
    chat_id: str


class GcResult(Model):
    removed_blobs: int
    freed_bytes: int


class ChangedParams(Model):
    chat_id: str
    manifest_id: str
    changed: Changes
    unversioned: Annotated[list[str], msgspec.Meta(description=(
        "Paths a snapshot found but left out of every version, each announced once: names that are "
        "not valid UTF-8 (each bad byte shown as \\xNN; a folder stands for all under it) and entries "
        "it could not read. They stay in the folder untouched; rename them to have them versioned."))] = []


SPECS = (
    MethodSpec("workspace/files", "clientToServer", "request",
               "List the files of a workspace version (default: the current one).",
               params=FilesParams, result=FilesResult, errors=(_NF, _ST),
               seed_endpoints=("get_workspace_files",)),
    MethodSpec("workspace/readFile", "clientToServer", "request",
               "Read one file as text or base64, up to maxBytes (InvalidParams past it).",
               params=ReadFileParams, result=ReadFileResult, errors=(_NF, _IP, _ST),
               seed_endpoints=("get_workspace_file",)),
    MethodSpec("workspace/writeFile", "clientToServer", "request",
               "Write one file (text or base64) into the current workspace: a new edit version.",
               params=WriteFileParams, result=ManifestIdResult, errors=(_NF, _IP, _ST)),
    MethodSpec("workspace/upload", "clientToServer", "request",
               "Copy files or folders from this machine into the workspace: a user_upload version.",
               params=UploadParams, result=UploadResult, errors=(_NF, _IP, _ST)),
    MethodSpec("workspace/manifest", "clientToServer", "request",
               "A manifest by id, the one in effect after a message, or the active one.",
               params=ManifestParams, result=ManifestResult, errors=(_NF, _ST),
               seed_endpoints=("get_workspace_manifest",)),
    MethodSpec("workspace/diff", "clientToServer", "request",
               "Paths added, removed and modified between two manifests.",
               params=DiffParams, result=Changes, errors=(_NF, _ST)),
    MethodSpec("workspace/gc", "clientToServer", "request",
               "Delete stored file contents that no version of the chat refers to.",
               params=GcParams, result=GcResult, errors=(_NF, _ST)),
    MethodSpec("workspace/changed", "serverToClient", "notification",
               "Files of a chat's workspace changed from outside the sidecar (an editor); "
               "the change is saved as a new edit version. Also sent, with empty changes, when a "
               "snapshot meets paths it cannot version (see unversioned).",
               params=ChangedParams),
)
