"""Render plans: how the app shows a tool call's result (spec section 5).

``interpolate`` fills ``$args``/``$return``/... expressions into a renderer config, ``render_plan``
validates the config of one renderer type, and ``inject_html`` puts the data into an html
renderer's page so that no value can ever break out of its ``<script>`` element.

Interpolation syntax: ``$name`` followed by path segments ``.key``, ``.2`` or ``[2]``; the
expression is the longest well-formed path, so ``"$args.path."`` and ``"[$args.x]"`` end before
the ``.``/``]``. ``$$`` is a literal ``$``, and a ``$`` not followed by a letter or ``_`` (``"$5"``)
is kept as it is. Substituted values are never scanned again, and nothing is ever evaluated.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ..api.render_plans import RENDERERS
from ..workspace import paths
from .html_scan import insertion_point

_EXPR = re.compile(r"\$\$|\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_]+|\[[0-9]+\])*)")
_SEGMENT = re.compile(r"\.([A-Za-z0-9_]+)|\[([0-9]+)\]")
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_MISSING = object()


class RenderError(ValueError):
    pass


class Interpolated(NamedTuple):
    value: Any
    missing: list[str]  # expressions that resolved to nothing, in order of first use, once each


def interpolate(value: Any, scope: dict[str, Any]) -> Interpolated:
    """Fill expressions in every string of ``value`` (dicts and lists are walked, keys are not).

    ``scope`` maps root names (``args``, ``return``, ``chat_id``, ...) to their values. A string
    that is exactly one expression becomes the value itself, keeping its type; inside a longer
    string a value is written as text (JSON for dicts, lists, booleans and None). A missing path,
    or an unknown root name, is None as a whole value and "" inside a string, and is reported.
    """
    missing: list[str] = []

    def lookup(m: re.Match[str]) -> Any:
        found = _resolve(scope, m[1], m[2])
        if found is _MISSING and m[0] not in missing:
            missing.append(m[0])
        return found

    def text(m: re.Match[str]) -> str:
        if m[0] == "$$":
            return "$"
        found = lookup(m)
        if found is _MISSING:
            return ""
        if isinstance(found, str):
            return found
        if isinstance(found, (dict, list, bool)) or found is None:
            return json.dumps(found, ensure_ascii=False)
        return str(found)

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if not isinstance(v, str):
            return v
        whole = _EXPR.fullmatch(v)
        if whole and whole[0] != "$$":
            found = lookup(whole)
            return None if found is _MISSING else found
        return _EXPR.sub(text, v)

    return Interpolated(walk(value), missing)


def _resolve(scope: dict[str, Any], root: str, path: str) -> Any:
    if root not in scope:
        return _MISSING
    current = scope[root]
    for key, index in _SEGMENT.findall(path):
        step = key or index
        if isinstance(current, dict):
            current = current.get(step, _MISSING)
        elif isinstance(current, list) and step.isdigit() and int(step) < len(current):
            current = current[int(step)]
        else:
            return _MISSING  # a missing key, an index out of range, or a step into a scalar
        if current is _MISSING:
            return _MISSING
    return current


def render_plan(
    renderer: str | None,
    config: dict[str, Any] | None,
    *,
    args: Any,
    result: Any,
    chat_id: str | None,
    workspace: Path | None,
    toolset_dir: Path | None,
) -> dict[str, Any] | None:
    """The plan ``{"renderer", "config", "missing"}`` for one tool call, or None without a renderer.

    ``missing`` lists the expressions that resolved to nothing, so the caller can warn about them.
    Raises ``RenderError`` for an unknown renderer or a config that names something it must not.
    """
    if renderer is None:
        return None
    if renderer not in RENDERERS:
        raise RenderError(f"unknown renderer {renderer!r}: use one of {', '.join(RENDERERS)}")
    if config is not None and not isinstance(config, dict):
        raise RenderError(f"the {renderer} renderer config must be an object")
    scope = {
        "args": args,
        "return": result,
        "chat_id": chat_id,
        "workspace": None if workspace is None else str(workspace),
        "toolset": None if toolset_dir is None else str(toolset_dir),
    }
    filled, missing = interpolate(config or {}, scope)
    if renderer == "html":
        filled["artifact"] = _artifact(filled.get("artifact"), toolset_dir)
    elif renderer == "frame":
        filled["url"] = _frame_url(filled)
    elif renderer == "image" and "images" in filled:
        _images(filled["images"])
    else:
        _file_or_content(renderer, filled)
    return {"renderer": renderer, "config": filled, "missing": missing}


def _artifact(artifact: Any, toolset_dir: Path | None) -> str:
    if not isinstance(artifact, str) or not artifact:
        raise RenderError("the html renderer needs an artifact path inside the toolset")
    if toolset_dir is None:
        raise RenderError(f"artifact {artifact!r}: the tool has no toolset directory")
    try:
        rel = paths.check(artifact.removeprefix("./"))
    except paths.PathRejected as exc:
        raise RenderError(f"artifact {artifact!r}: {exc}") from None
    # Compare real paths so that a symlink anywhere on the way, the file itself included, is
    # judged by where it really leads.
    root = os.path.realpath(toolset_dir)
    real = os.path.realpath(os.path.join(root, *rel.split("/")))
    if not real.startswith(root + os.sep):
        raise RenderError(f"artifact {artifact!r} leads out of the toolset directory")
    if not os.path.isfile(real):
        raise RenderError(f"artifact {artifact!r} is not a file in the toolset")
    return real


def _frame_url(config: dict[str, Any]) -> str:
    url = config.get("url")
    if url is None:
        port = config.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise RenderError(f"the frame renderer needs a url or a port from 1 to 65535, not {port!r}")
        return f"http://127.0.0.1:{port}/"
    # Browsers read '\' as '/' and drop tabs and newlines, so such a URL could name another host
    # than the one checked here.
    if not isinstance(url, str) or re.search(r"[\\\s\x00-\x1f\x7f]", url):
        raise RenderError(f"frame url {url!r} is not a plain http(s) URL")
    try:
        parts = urlsplit(url)
        _ = parts.port  # reading it raises ValueError for a port that is not 0..65535
    except ValueError:
        raise RenderError(f"frame url {url!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or "@" in parts.netloc or parts.hostname not in _LOCAL_HOSTS:
        raise RenderError(f"frame url {url!r} must be http(s) to localhost, 127.0.0.1 or [::1]")
    return url


def _images(images: Any) -> None:
    if not isinstance(images, list) or not images or not all(
            isinstance(i, dict) and isinstance(i.get("index"), int) and not isinstance(i.get("index"), bool)
            for i in images):
        raise RenderError("the image renderer's images must be a list of {index, mimeType}: positions of image "
                          "blocks in the result's content")


def _file_or_content(renderer: str, config: dict[str, Any]) -> None:
    file = config.get("file")
    if file is None:
        if "content" not in config:
            raise RenderError(f"the {renderer} renderer needs a file or content")
        return
    if not isinstance(file, str):
        raise RenderError(f"the {renderer} renderer file must be a workspace path, not {file!r}")
    try:
        paths.check(file.removeprefix("./"))
    except paths.PathRejected as exc:
        raise RenderError(f"file {file!r}: {exc}") from None


def inject_html(html: str, data: Any) -> str:
    """Put ``data`` into the page as ``window.__TOOL_DATA__`` where a browser runs it: before the
    ``</head>`` end tag, else right after ``<body ...>``, else after the doctype or at the start
    (tags inside comments, scripts, titles, templates and svg do not count: see ``html_scan``)."""
    # <, > and & can only occur inside JSON strings, where \\uXXXX means the same character, so
    # the JSON stays valid while no value can close the script element or open a comment.
    # U+2028/9 are line breaks to older JS parsers; lone surrogates cannot be encoded as UTF-8.
    payload = re.sub(
        "[<>&\u2028\u2029\ud800-\udfff]",
        lambda m: f"\\u{ord(m[0]):04x}",
        json.dumps(data, ensure_ascii=False),
    )
    script = f"<script>window.__TOOL_DATA__ = {payload};</script>"
    at = insertion_point(html)
    return html[:at] + script + html[at:]


def load_artifact_page(plan: dict[str, Any], toolset_dir: str | Path) -> str:
    """The html renderer's page: its artifact (UTF-8) with ``config["data"]`` injected.

    The plan was checked when the call was made, but a tool may have replaced its artifact since
    (with a symlink to ``/etc/passwd``, say): the file is read again below ``toolset_dir`` without
    following a symlink at any step, and it must be a regular file."""
    if plan.get("renderer") != "html":
        raise RenderError(f"only an html plan has an artifact page, not {plan.get('renderer')!r}")
    config = plan["config"]
    artifact = config["artifact"]
    root = os.path.realpath(toolset_dir)
    parts = artifact[len(root) + 1:].split(os.sep) if artifact.startswith(root + os.sep) else []
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise RenderError(f"artifact {artifact!r} is not inside the toolset folder {root!r}")
    try:
        html = _read_inside(root, parts).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RenderError(f"artifact {artifact!r} cannot be read: {exc}") from None
    return inject_html(html, config.get("data"))


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # there on Linux and macOS; Windows has no symlinks to fear here
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK: opening a FIFO planted at the name must not wait for a writer.
_FILE = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
MAX_ARTIFACT_BYTES = 32 << 20  # a page this big is a mistake or an attack, and it is sent in one answer


def _read_inside(root: str, parts: list[str]) -> bytes:
    """The bytes of the regular file ``root/parts...``, opening each folder from the one before it
    (``dir_fd``) so that no symlink is followed anywhere below ``root``."""
    fd = os.open(root, _DIR)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nxt = os.open(part, _FILE if last else _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):  # EMLINK: FreeBSD's ELOOP here
                    what = "is a symlink" if last else "passes through a symlink or a file"
                    raise RenderError(f"{'/'.join(parts)} {what}: it is not followed") from None
                raise
            os.close(fd)
            fd = nxt
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RenderError(f"{'/'.join(parts)} is not a regular file")
        if info.st_size > MAX_ARTIFACT_BYTES:
            raise RenderError(f"{'/'.join(parts)} is {info.st_size} bytes; an artifact may have "
                              f"{MAX_ARTIFACT_BYTES} at most")
        with os.fdopen(fd, "rb") as f:
            fd = -1  # the file object closes it
            data = f.read(MAX_ARTIFACT_BYTES + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_ARTIFACT_BYTES:
        raise RenderError(f"{'/'.join(parts)} grew past {MAX_ARTIFACT_BYTES} bytes while it was read")
    return data
