"""Per-chat workspaces: files versioned by manifest."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode

_NF, _ST, _IP = ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR, ErrorCode.INVALID_PARAMS

_CHAT = "The chat (NotFound if unknown)."
_PATH = ("relative to the workspace root, '/'-separated (no '..', '.', empty or absolute parts, no backslash "
         "or control character; a trailing '/' is dropped)")
_SHA = "SHA-256 of the content, 64 lowercase hex digits."
_VERSION = ("A workspace version (manifest id) of this chat (NotFound otherwise); absent or null: the current "
            "workspace, with outside edits saved as a new version first.")


class FileEntry(Model):
    path: Annotated[str, msgspec.Meta(description="The file's path, " + _PATH + ".")]
    size: Annotated[int, msgspec.Meta(description="Its size in bytes.")]
    sha256: Annotated[str, msgspec.Meta(description=_SHA)]


class FilesParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]
    manifest_id: Annotated[str | None, msgspec.Meta(description=_VERSION)] = None


class FilesResult(Model):
    files: Annotated[list[FileEntry], msgspec.Meta(description="Every file of that version, sorted by path.")]
    manifest_id: Annotated[str | None, msgspec.Meta(
        description="The version listed; absent while the workspace has never held a file.")] = None


class ReadFileParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]
    path: Annotated[str, msgspec.Meta(description="The file, " + _PATH + "; a folder is InvalidParams.")]
    manifest_id: Annotated[str | None, msgspec.Meta(description=_VERSION)] = None
    max_bytes: Annotated[int, msgspec.Meta(
        description="The largest file to return, in bytes: 1 to 50331648 (48 MiB), default 8388608 (8 MiB); a "
                    "larger file is InvalidParams (open it from the chat's workspacePath instead).")] = 8 << 20


class ReadFileResult(Model):
    path: Annotated[str, msgspec.Meta(description="The file's path, normalised.")]
    size: Annotated[int, msgspec.Meta(description="Its size in bytes.")]
    sha256: Annotated[str, msgspec.Meta(description=_SHA)]
    text: Annotated[str | None, msgspec.Meta(
        description="The content, when it is UTF-8 without NUL bytes; absent otherwise (then base64).")] = None
    base64: Annotated[str | None, msgspec.Meta(
        description="The content in standard base64, when it is not text; absent when text is given.")] = None


class WriteFileParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]
    path: Annotated[str, msgspec.Meta(
        description="The file to create or replace, " + _PATH + "; folders are made as needed; a path that is, or "
                    "passes through, a symbolic link, a folder or a special file is InvalidParams.")]
    text: Annotated[str | None, msgspec.Meta(
        description="The content as text, written as UTF-8; give exactly one of text and base64.")] = None
    base64: Annotated[str | None, msgspec.Meta(
        description="The content in standard base64 (strict: InvalidParams if malformed); give exactly one of "
                    "text and base64.")] = None


class ManifestIdResult(Model):
    manifest_id: Annotated[str, msgspec.Meta(
        description="The workspace version after the write (the current one, unchanged, when the file already "
                    "held that content).")]


class UploadParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]
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
    manifest_id: Annotated[str | None, msgspec.Meta(
        description="The new user_upload version; absent when nothing changed (every file was there already, "
                    "with the same content).")] = None
    added: Annotated[list[str], msgspec.Meta(description="Paths the upload added, sorted.")] = []
    modified: Annotated[list[str], msgspec.Meta(
        description="Paths whose content the upload replaced, sorted.")] = []


class ManifestParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]
    message_id: Annotated[str | None, msgspec.Meta(
        description="A message of the chat: the version in effect after it (NotFound if unknown). Not with "
                    "manifestId.")] = None
    manifest_id: Annotated[str | None, msgspec.Meta(
        description="A version by id (NotFound if not the chat's). Neither this nor messageId: the current "
                    "version, outside edits saved first.")] = None


class Manifest(Model):
    id: Annotated[str, msgspec.Meta(description="The version's id (a UUIDv7).")]
    files: Annotated[dict[str, str], msgspec.Meta(
        description="Every file of the version: path -> SHA-256 of its content (64 lowercase hex digits).")]
    source: Annotated[Literal["user_upload", "tool_run", "branch", "edit"], msgspec.Meta(
        description="What made it: 'user_upload' (workspace/upload), 'tool_run' (a tool call; sourceRef names "
                    "it) or 'edit' (workspace/writeFile, or edits from outside the sidecar). 'branch' is "
                    "reserved: no version is made with it today.")]
    created_at: Annotated[str, msgspec.Meta(
        description="When it was made, ISO 8601 UTC ('2026-01-02T03:04:05.678901Z').")]
    parent_id: Annotated[str | None, msgspec.Meta(
        description="The version that was current when it was made; absent for the chat's first.")] = None
    source_ref: Annotated[str | None, msgspec.Meta(
        description="For source tool_run: the id of the tool call that made it; absent otherwise.")] = None


class ManifestResult(Model):
    manifest: Annotated[Manifest | None, msgspec.Meta(
        description="The version; absent: that point of the chat has no files (no version yet).")] = None


class DiffParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]
    from_: Annotated[str, msgspec.Meta(
        description="The older version (manifest id of this chat; NotFound otherwise).")] = msgspec.field(
        name="from")
    to: Annotated[str, msgspec.Meta(description="The newer version (manifest id of this chat).")]


class Changes(Model):
    added: Annotated[list[str], msgspec.Meta(description="Paths only in the newer version, sorted.")]
    removed: Annotated[list[str], msgspec.Meta(description="Paths only in the older version, sorted.")]
    modified: Annotated[list[str], msgspec.Meta(
        description="Paths in both whose content differs, sorted.")]


class GcParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description=_CHAT)]


class GcResult(Model):
    removed_blobs: Annotated[int, msgspec.Meta(
        description="Stored file contents deleted: those no version of the chat refers to.")]
    freed_bytes: Annotated[int, msgspec.Meta(description="The disk space they took, in bytes.")]


class ChangedParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description="The chat whose workspace changed.")]
    manifest_id: Annotated[str, msgspec.Meta(
        description="The new edit version holding the outside edits (with only unversioned paths: the current "
                    "version).")]
    changed: Annotated[Changes, msgspec.Meta(
        description="What changed against the version before; all empty when only unversioned is news.")]
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
