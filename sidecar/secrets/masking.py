"""Secrets never leave the sidecar in clear: the one place that says how they are shown.

Responses, log lines and error messages mask them (``mask*``, ``masked_key``, ``scrub``); exports turn
them into ``${VAR}`` placeholders (``placeholder*``). A ``${VAR}`` reference is not a secret and shows
as is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from .variables import is_reference

MASK = "****"
_SECRET_NAME = re.compile(r"(token|secret|passw|api[-_]?key|auth|credential|signature|sig$|key$)", re.I)


def scrub(text: str, values: Iterable[str], shown: Callable[[str], str] = lambda _: MASK) -> str:
    """`text` with every known secret value in it replaced by ``shown(value)`` (default: masked).

    A peer may echo what it was sent (a key, a header, a token-bearing URL). Values shorter than 4
    characters are left alone: they would mask ordinary words. Longer values go first, so a value
    that contains another is replaced whole.
    """
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, shown(value))
    return text


def mask(value: str) -> str:
    """A ``${VAR}`` reference is not a secret; any literal value is shown masked."""
    return value if is_reference(value) else MASK


def mask_map(values: dict[str, str]) -> dict[str, str]:
    return {k: mask(v) for k, v in values.items()}


Replace = Callable[[str, str], str]  # (name the value is known by, value) -> shown value


def _rewrite_pairs(text: str, replace: Replace, bare_name: str) -> str:
    """Every value of a ``k=v&...`` text through `replace`, keys kept so the shape stays visible.

    A part without ``=`` may itself be the secret (``?sk-live-123``, ``#eyJ...``): it is replaced
    whole, under `bare_name`. An empty value has nothing to hide and stays empty; a value that is a
    ``${VAR}`` reference (even percent-encoded) keeps its original spelling.
    """
    out: list[str] = []
    for part in text.split("&"):
        if not part:
            out.append(part)
            continue
        key, eq, value = part.partition("=")
        if not eq:
            plain = unquote_plus(part)
            shown = replace(bare_name, plain)
            out.append(part if shown == plain else shown)
        elif not value:
            out.append(part)
        else:
            plain = unquote_plus(value)
            shown = replace(unquote_plus(key), plain)
            out.append(f"{key}={value if shown == plain else shown}")
    return "&".join(out)


def _rewrite_url(url: str, replace: Replace) -> str:
    """Userinfo, every query value and the fragment's values through `replace`.

    Whether a query value is secret cannot be told from its name (``?jwt=``, ``?session=``, ``?k=``),
    so every literal value goes through `replace`, and so does the fragment (``#access_token=``).
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(invalid URL)"
    netloc = parts.netloc
    if "@" in netloc:  # user:password@host
        user, _, host = netloc.rpartition("@")
        netloc = f"{replace('url_credentials', user)}@{host}"
    query = _rewrite_pairs(parts.query, replace, "query")
    fragment = _rewrite_pairs(parts.fragment, replace, "fragment")
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _rewrite_args(args: list[str], replace: Replace) -> list[str]:
    """The value after ``--token``-like flags, and in ``--token=...`` / ``token=...`` forms."""
    out: list[str] = []
    secret_flag = ""
    for arg in args:
        if secret_flag:
            out.append(replace(secret_flag, arg))
            secret_flag = ""
            continue
        flag, eq, value = arg.partition("=")
        if eq and _SECRET_NAME.search(flag):
            out.append(f"{flag}={replace(flag, value)}")
        else:
            out.append(arg)
            if arg.startswith("-") and _SECRET_NAME.search(arg):
                secret_flag = arg
    return out


def _masked(name: str, value: str) -> str:
    return mask(value)


def _placeholder(name: str, value: str) -> str:
    if is_reference(value):
        return value
    return "${" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper() + "}"


def mask_url(url: str) -> str:
    return _rewrite_url(url, _masked)


def mask_args(args: list[str]) -> list[str]:
    return _rewrite_args(args, _masked)


def placeholder_map(values: dict[str, str]) -> dict[str, str]:
    """For exports: every literal value becomes a ``${NAME}`` placeholder named after its key."""
    return {k: _placeholder(k, v) for k, v in values.items()}


def placeholder_url(url: str) -> str:
    return _rewrite_url(url, _placeholder)


def placeholder_args(args: list[str]) -> list[str]:
    return _rewrite_args(args, _placeholder)


def masked_command(command: str | None, args: list[str]) -> list[str] | None:
    """A server's command line as responses show it: the command, then its args with secrets masked."""
    return [command, *mask_args(args)] if command else None


def secret_values(*, args: list[str] | None = None, env: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None, url: str | None = None) -> list[str]:
    """The literal values a masked view of this config would hide: what `known.remember` should get."""
    found: list[str] = []

    def collect(name: str, value: str) -> str:
        if not is_reference(value) and value:
            found.append(value)
        return MASK

    _rewrite_args(args or [], collect)
    for values in (env or {}, headers or {}):
        for name, value in values.items():
            if _SECRET_NAME.search(name):
                collect(name, value)
    if url:
        _rewrite_url(url, collect)
    return found


def masked_tail(value: str) -> str:
    """How ``secrets/list`` shows a stored secret: the last 4 characters of a long value (enough to
    tell two apart), nothing of a short one."""
    return MASK + value[-4:] if len(value) >= 12 else MASK


def masked_key(key: str) -> str:
    """How responses show an API key: enough to tell keys apart (``sk-…abcd``), never enough to use."""
    if is_reference(key):
        return key
    return f"{key[:3]}…{key[-4:]}" if len(key) >= 16 else MASK


_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def mask_text(text: str) -> str:
    """Free text (a log line, an exception message, a server's stderr) with the secrets it shows by
    their shape masked: every URL in it through `mask_url`."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: mask_url(m.group(0)), text)
