"""Reading a toolset bundle (a ZIP file or a folder) without trusting anything in it.

Every entry name is checked like a workspace path (no absolute paths, drive letters, backslashes,
``..``, NUL, duplicates), links are refused, and sizes are limited by what is actually read, not
what the archive claims, so a ZIP bomb stops at the limit. Entrypoints are checked by parsing the
module (``ast``), never by importing it: nothing from a bundle runs while it is inspected.
"""

from __future__ import annotations

import ast
import os
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

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
SKIPPED_DIRS = {"__pycache__", ".git", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"}


@dataclass
class Bundle:
    source: Path
    source_type: SourceType  # "user": mcpServers/add, which has no bundle
    files: dict[str, bytes]  # bundle path -> content, manifest included
    parsed: Parsed
    warnings: list[str] = field(default_factory=list)
    # Tools whose module or function the bundle lacks, when read to replace an installed version
    # (``read(tolerate_vanished=True)``): manifest tool id -> the refusal a fresh install gets.
    vanished: dict[str, BundleError] = field(default_factory=dict)

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
    source_type: SourceType
    if path.is_dir():
        files, source_type = _read_dir(path), "local"
    elif path.is_file():
        files, source_type = _read_zip(path), "zip"
    else:
        raise BundleError("", f"{source} does not exist")
    files = _strip_top_folder(files)
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
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError("", f"{path.name} is not a readable ZIP file: {exc}") from None
    files: dict[str, bytes] = {}
    budget = _Budget()
    with archive:
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
    chunks, size = [], 0
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


def _read_dir(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _Budget()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        base = Path(dirpath)
        for name in [*dirnames, *filenames]:
            full = base / name
            if full.is_symlink():
                rel = full.relative_to(root).as_posix()
                raise BundleError(rel, "symbolic links are not allowed in a toolset: copy the file instead")
        for name in sorted(filenames):
            full = base / name
            rel = _entry_name(full.relative_to(root).as_posix())
            size = full.stat().st_size
            budget.add(rel, size)
            files[rel] = full.read_bytes()
    return files


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


def _check_entrypoints(bundle: Bundle, tolerate_vanished: bool) -> None:
    trees: dict[str, ast.Module] = {}
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
        if path not in trees:
            try:
                trees[path] = ast.parse(bundle.files[path], filename=path)
            except SyntaxError as exc:
                raise BundleError(f"{path}:{exc.lineno}", f"syntax error: {exc.msg}") from None
        if not _defines(trees[path], function):
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
