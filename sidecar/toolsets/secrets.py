"""Secrets in toolset configuration never leave the sidecar in clear: responses mask them, and
exports turn them into ``${VAR}`` placeholders."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "****"
_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_SECRET_NAME = re.compile(r"(token|secret|passw|api[-_]?key|auth|credential|signature|sig$|key$)", re.I)


def is_reference(value: str) -> bool:
    return bool(_REFERENCE.match(value))


def mask(value: str) -> str:
    """A ``${VAR}`` reference is not a secret; any literal value is shown masked."""
    return value if is_reference(value) else MASK


def mask_map(values: dict[str, str]) -> dict[str, str]:
    return {k: mask(v) for k, v in values.items()}


def mask_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:  # user:password@host
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = urlencode(
        [(k, mask(v) if _SECRET_NAME.search(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
        safe="${}*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_args(args: list[str]) -> list[str]:
    """Mask the value after ``--token``-like flags and in ``--token=...`` / ``token=...`` forms."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(mask(arg))
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        if eq and _SECRET_NAME.search(flag):
            out.append(f"{flag}={mask(value)}")
        elif arg.startswith("-") and _SECRET_NAME.search(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(arg)
    return out


def _var(name: str) -> str:
    return "${" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper() + "}"


def placeholder_map(values: dict[str, str]) -> dict[str, str]:
    """For exports: every literal value becomes a ``${NAME}`` placeholder named after its key."""
    return {k: v if is_reference(v) else _var(k) for k, v in values.items()}


def placeholder_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "${URL_CREDENTIALS}@" + netloc.rpartition("@")[2]
    query = urlencode(
        [(k, v if is_reference(v) or not _SECRET_NAME.search(k) else _var(k))
         for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="${}")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def placeholder_args(args: list[str]) -> list[str]:
    out: list[str] = []
    previous = ""
    for arg in args:
        flag, eq, value = arg.partition("=")
        if eq and _SECRET_NAME.search(flag) and not is_reference(value):
            out.append(f"{flag}={_var(flag)}")
        elif previous.startswith("-") and _SECRET_NAME.search(previous) and not is_reference(arg):
            out.append(_var(previous))
        else:
            out.append(arg)
        previous = arg if not eq else ""
    return out
