"""Reading a toolset bundle (a ZIP file or a folder) without trusting anything in it.

Every entry name is checked like a workspace path (no absolute paths, drive letters, backslashes,
``..``, NUL, duplicates), links are refused, and sizes are limited by what is actually read, not
what the archive claims, so a ZIP bomb stops at the limit. Entrypoints are checked by parsing the
module (``ast``), never by importing it: nothing from a bundle runs while it is inspected.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..errors import BundleError
from ..store.toolsets import FileKind, SourceType
from ..tools.providers.python.entrypoints import module_path
from ..workspace import paths
from .manifest import ManifestError, Parsed, parse

MANIFEST = "toolset.yaml"
MAX_FILES = 5_000
MAX_FILE_BYTES = 64 << 20
MAX_TOTAL_BYTES = 256 << 20
MAX_RATIO = 200  # uncompressed / compressed, for entries large enough to matter
# ast.parse holds about 400 bytes per byte of source (an 8 MiB module of one-line statements took
# 3.3 GB and 19 s): a bigger module is checked line by line here, and parsed only by the worker
# that imports it, in its own process.
MAX_PARSED_MODULE_BYTES = 256 << 10
SKIPPED_DIRS = {"__pycache__", ".git", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"}
# A ZIP local file header: signature, versions, flags, method, time, date, CRC, sizes, then the
# lengths of the name and the extra field that sit between it and the entry's data.
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


@dataclass
class Bundle:
    source: Path
    source_type: SourceType  # "user": mcpServers/add, which has no bundle
    files: dict[str, bytes]  # bundle path -> content, manifest included
    parsed: Parsed
    warnings: list[str] = field(default_factory=list[str])
    # Tools whose module or function the bundle lacks, when read to replace an installed version
    # (``read(tolerate_vanished=True)``): manifest tool id -> the refusal a fresh install gets.
    vanished: dict[str, BundleError] = field(default_factory=dict[str, BundleError])

    @property
    def manifest(self):
        return self.parsed.manifest


def kind_of(path: str) -> FileKind:
    if path.endswith(".py"):
        return "python"
    if path.startswith("artifacts/"):
        return "artifact"
    if "/" not in path and path.endswith((".yaml", ".yml", ".json", ".toml")):
        return "config"
    return "asset"


def read(source: str | os.PathLike[str], *, tolerate_vanished: bool = False) -> Bundle:
    """``tolerate_vanished``: a tool whose module or function is gone is recorded in
    ``Bundle.vanished`` instead of refusing the bundle (a reload or upgrade keeps such a tool,
    unavailable, seed 002)."""
    path = Path(source)
    if not path.is_absolute():
        raise BundleError("", f"{source}: give an absolute path to a .zip file or a folder")
    try:
        mode = path.stat().st_mode  # the path the user gave may be a link; what is inside may not
    except OSError:
        raise BundleError("", f"{source} does not exist") from None
    source_type: SourceType
    if stat.S_ISDIR(mode):
        files, source_type = _read_dir(path), "local"
    elif stat.S_ISREG(mode):
        files, source_type = _read_zip(path), "zip"
    else:
        raise BundleError("", f"{source} is {_kind_name(mode)}, not a .zip file or a folder")
    files = _strip_top_folder(files)
    _refuse_file_folder_clashes(files)
    try:
        parsed = parse(files[MANIFEST])
    except ManifestError as exc:
        raise BundleError(f"{MANIFEST}: {exc.path}" if exc.path else MANIFEST, exc.reason) from None
    bundle = Bundle(path, source_type, files, parsed, list(parsed.warnings))
    _check_entrypoints(bundle, tolerate_vanished)
    _check_artifacts(bundle)
    return bundle


class _Budget:
    def __init__(self) -> None:
        self.files = 0
        self.total = 0

    def add(self, name: str, size: int) -> None:
        self.files += 1
        self.total += size
        if self.files > MAX_FILES:
            raise BundleError("", f"more than {MAX_FILES} files: a toolset this large is refused")
        if size > MAX_FILE_BYTES:
            raise BundleError(name, f"larger than the {MAX_FILE_BYTES >> 20} MiB per-file limit")
        if self.total > MAX_TOTAL_BYTES:
            raise BundleError("", f"more than {MAX_TOTAL_BYTES >> 20} MiB uncompressed in all")


def _entry_name(raw: str) -> str:
    if "\\" in raw:
        raise BundleError(raw, "entry names must use '/', not backslashes")
    if raw.startswith("/"):
        raise BundleError(raw, "absolute entry names are not allowed")
    try:
        return paths.check(raw)
    except paths.PathRejected as exc:
        raise BundleError(repr(raw), str(exc)) from None


def _read_zip(path: Path) -> dict[str, bytes]:
    handle = _open_regular(path, path.name, follow=True)
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError) as exc:
        handle.close()
        raise BundleError("", f"{path.name} is not a readable ZIP file: {exc}") from None
    files: dict[str, bytes] = {}
    budget = _Budget()
    with handle, archive:
        if sum(not info.is_dir() for info in archive.infolist()) > MAX_FILES:
            raise BundleError("", f"more than {MAX_FILES} files: a toolset this large is refused")
        _refuse_overlaps(archive, handle)
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = _entry_name(info.filename)
            if stat.S_ISLNK(info.external_attr >> 16):
                raise BundleError(name, "symbolic links are not allowed in a toolset")
            if name in files:
                raise BundleError(name, "the archive holds this name twice")
            if info.file_size > (1 << 20) and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                raise BundleError(name, f"compresses more than {MAX_RATIO}:1: refused as a possible ZIP bomb")
            budget.add(name, info.file_size)
            files[name] = _read_entry(archive, info, name)
    return files


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> bytes:
    # The declared size can lie; count what decompresses and stop at the limit.
    chunks: list[bytes] = []
    size = 0
    try:
        with archive.open(info) as entry:
            while chunk := entry.read(1 << 20):
                size += len(chunk)
                if size > MAX_FILE_BYTES or size > max(info.file_size, 0) + (1 << 16):
                    raise BundleError(name, "decompresses to more than the archive declares")
                chunks.append(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError) as exc:  # RuntimeError: encrypted
        raise BundleError(name, f"cannot be read from the archive: {exc}") from None
    return b"".join(chunks)


def _kind_name(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _open_regular(path: Path, name: str, *, follow: bool = False) -> BinaryIO:
    """``path`` opened for reading if it is a regular file. O_NONBLOCK: should it have been swapped
    for a FIFO after it was looked at, the open returns at once instead of waiting for a writer
    that never comes (and holding a worker thread forever); fstat then says what was opened.
    ``follow``: the path the user gave may be a link; a file inside a toolset may not."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BundleError(name, f"cannot be read: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BundleError(name, f"is {_kind_name(mode)}: a toolset holds only regular files and folders")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _read_dir(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root``. Each entry is classified by lstat before anything is
    opened: a link, FIFO, socket or device is refused by name (a FIFO opened for reading would
    block until someone writes to it)."""
    files: dict[str, bytes] = {}
    budget = _Budget()
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise BundleError(Path(folder).relative_to(root).as_posix() or ".",
                              f"cannot be listed: {exc.strerror}") from None
        subfolders: list[Path] = []
        for entry in entries:
            full = Path(entry.path)
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:  # removed since it was listed: the folder is being edited
                raise BundleError(full.relative_to(root).as_posix(),
                                  f"changed while the toolset was read ({exc.strerror}); try again") from None
            if stat.S_ISDIR(mode):
                if entry.name not in SKIPPED_DIRS:
                    subfolders.append(full)
                continue
            rel = full.relative_to(root).as_posix()
            if stat.S_ISLNK(mode):
                raise BundleError(rel, "symbolic links are not allowed in a toolset: copy the file instead")
            if not stat.S_ISREG(mode):
                raise BundleError(rel, f"is {_kind_name(mode)}: a toolset holds only regular files and folders")
            rel = _entry_name(rel)
            with _open_regular(full, rel) as f:
                if os.fstat(f.fileno()).st_size > MAX_FILE_BYTES:
                    budget.add(rel, MAX_FILE_BYTES + 1)  # refused before a byte is read
                # What is read counts, not what stat said: a file growing meanwhile stops at the limit.
                data = f.read(MAX_FILE_BYTES + 1)
            budget.add(rel, len(data))
            files[rel] = data
        pending.extend(reversed(subfolders))
    return files


def _refuse_overlaps(archive: zipfile.ZipFile, handle: BinaryIO) -> None:
    """Refuse an archive whose entries share bytes: the "overlapping ZIP" bomb points thousands of
    entries at one compressed stream, each within the ratio limit, so only the total (after
    inflating hundreds of MiB) would stop it. Each entry's data must end before the next begins."""
    spans: list[tuple[int, int, str]] = []  # (start, end, name) of each entry's bytes
    for info in archive.infolist():
        handle.seek(info.header_offset)
        header = handle.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise BundleError(info.filename, "the archive's directory points at no entry: a damaged or crafted ZIP")
        name_len, extra_len = _LOCAL_HEADER.unpack(header)[-2:]
        start = info.header_offset
        end = start + _LOCAL_HEADER.size + name_len + extra_len + info.compress_size
        spans.append((start, end, info.filename))
    spans.sort()
    for (_, end, name), (start, _, following) in itertools.pairwise(spans):
        if start < end:
            raise BundleError(following, f"overlaps {name!r} in the archive: refused as a possible ZIP bomb")
    if spans and spans[-1][1] > archive.start_dir:
        raise BundleError(spans[-1][2], "runs into the archive's directory: a damaged or crafted ZIP")


def _refuse_file_folder_clashes(files: dict[str, bytes]) -> None:
    """``tools`` and ``tools/t.py`` cannot both be written out; neither can two names that differ
    only in case on the case-insensitive disks of macOS and Windows. Refused here, before
    anything is written."""
    seen: dict[str, str] = {name.casefold(): name for name in files}
    if len(seen) != len(files):
        for name in sorted(files):
            if seen[name.casefold()] != name:
                raise BundleError(name, f"differs from {seen[name.casefold()]!r} only in case: rename one of them")
    for name in sorted(files):
        parts = name.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder.casefold() in seen:
                raise BundleError(seen[folder.casefold()],
                                  f"is a file, and {name!r} needs a folder of that name: rename one of them")


def _strip_top_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    if MANIFEST in files:
        return files
    tops = {name.partition("/")[0] for name in files}
    if len(tops) == 1:
        top = tops.pop() + "/"
        if top + MANIFEST in files:
            return {name[len(top):]: data for name, data in files.items()}
    raise BundleError("", f"no {MANIFEST} at the top of the bundle (or inside its one top folder)")


def _module_file(files: dict[str, bytes], module: str) -> str | None:
    path = module_path(module)
    for candidate in (path, path.removesuffix(".py") + "/__init__.py"):
        if candidate in files:
            return candidate
    return None


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, ast.ImportFrom | ast.Import) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _defines_by_lines(source: bytes, name: str) -> bool:
    """What ``_defines`` says, read from the lines that start at column 0 (a def, class,
    assignment or import binding ``name``): for a module too big to parse here. A name that only
    seems defined (in a multi-line string) is caught when the worker imports the module."""
    word = re.escape(name.encode())
    pattern = (rb"^(?:(?:async[ \t]+)?def|class)[ \t]+" + word + rb"\b"
               rb"|^" + word + rb"[ \t]*(?::[^=\n]*)?=(?!=)"
               rb"|^(?:from[ \t]+\S+[ \t]+)?import[ \t][^\n]*\b" + word + rb"\b")
    return re.search(pattern, source, re.MULTILINE) is not None


def _check_entrypoints(bundle: Bundle, tolerate_vanished: bool) -> None:
    trees: dict[str, ast.Module | bytes] = {}
    for i, tool in enumerate(bundle.manifest.tools):
        if tool.entrypoint is None:
            continue  # an HTTP tool: no code in the bundle
        where = f"{MANIFEST}: tools[{i}].entrypoint"
        module, _, function = tool.entrypoint.partition(":")
        if module == "tools":
            raise BundleError(where, f'"{tool.entrypoint}" names the tools folder, not a module in it')
        path = _module_file(bundle.files, module)
        if path is None:
            gone = BundleError(where,
                               f'"{tool.entrypoint}" needs {module_path(module)}, which the bundle does not have')
            if not tolerate_vanished:
                raise gone
            bundle.vanished[tool.id] = gone
            continue
        if path not in trees and len(bundle.files[path]) > MAX_PARSED_MODULE_BYTES:
            trees[path] = bundle.files[path]
        elif path not in trees:
            try:
                trees[path] = ast.parse(bundle.files[path], filename=path)
            except SyntaxError as exc:
                raise BundleError(f"{path}:{exc.lineno}", f"syntax error: {exc.msg}") from None
            except (RecursionError, MemoryError, ValueError) as exc:
                # Nested too deep for CPython's parser (a long chain of "-" or "a.b.c"), or NUL bytes.
                raise BundleError(path, f"cannot be parsed as Python: {exc or 'nested too deeply'}") from None
        tree = trees[path]
        if not (_defines_by_lines(tree, function) if isinstance(tree, bytes) else _defines(tree, function)):
            gone = BundleError(where, f'"{tool.entrypoint}" has no function {function} in {path}')
            if not tolerate_vanished:
                raise gone
            bundle.vanished[tool.id] = gone


def _check_artifacts(bundle: Bundle) -> None:
    for override in bundle.parsed.overrides:
        if override.renderer != "html":
            continue
        artifact = (override.renderer_config or {}).get("artifact")
        where = f"{MANIFEST}: renderer of {override.tool_id!r}"
        if not isinstance(artifact, str) or not artifact:
            raise BundleError(where, "an html renderer needs an artifact path inside the toolset")
        try:
            rel = paths.check(artifact.removeprefix("./"))
        except paths.PathRejected as exc:
            raise BundleError(where, f"artifact {artifact!r}: {exc}") from None
        if rel not in bundle.files:
            raise BundleError(where, f"artifact {artifact!r} is not in the bundle")
