"""Workspace paths from outside are hostile until checked.

A workspace path on the wire is relative, '/'-separated, and names something inside the root:
no absolute paths, drive letters, UNC prefixes, '..', NUL or other control characters, and no
component that is empty or '.'. ``check`` returns the canonical form or raises ``PathRejected``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import PathRejected

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255


def check(path: str) -> str:
    if not isinstance(path, str) or not path:
        raise PathRejected("the path is empty")
    if _CONTROL.search(path):
        raise PathRejected("the path contains a control character (NUL, newline, ...)")
    if "\\" in path:
        raise PathRejected("use '/' as the separator; backslashes are not allowed")
    if path.startswith("/") or _DRIVE.match(path):
        raise PathRejected("the path must be relative to the workspace, not absolute")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PathRejected(f"the path is longer than {MAX_PATH_BYTES} bytes")
    parts = path.split("/")
    if parts[-1] == "":
        parts.pop()  # one trailing slash is tolerated
    for part in parts:
        if part in ("", "."):
            raise PathRejected("the path has an empty or '.' component")
        if part == "..":
            raise PathRejected("'..' is not allowed in workspace paths")
        if len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
            raise PathRejected(f"a path component is longer than {MAX_COMPONENT_BYTES} bytes")
    return "/".join(parts)


def inside(root: Path, rel: str) -> Path:
    """Join a checked path to ``root`` and make sure no symlink on the way leads out of it."""
    rel = check(rel)
    target = root.joinpath(*rel.split("/"))
    parent = target.parent
    real_root = os.path.realpath(root)
    real_parent = os.path.realpath(parent)
    if real_parent != real_root and not real_parent.startswith(real_root + os.sep):
        raise PathRejected("the path leads out of the workspace through a symbolic link")
    return target
