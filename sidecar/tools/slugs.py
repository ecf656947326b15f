"""Slugs and versions (seed 002): the short names a user types in the "+" palette (``+fetch-item``,
``+fetch-item@2``), and the rules every tool's pair follows.

A slug is Unicode letters, decimal digits and the ASCII dash, at most 64 runes, compared as
written (case-sensitive); a version is the same plus the dot, and is an opaque label (no ordering).
Everything else is refused: underscore, whitespace, slashes, punctuation, symbols (emoji among
them), control and format characters (the right-to-left override U+202E, zero-width joiners),
combining marks on their own. Text is taken in NFC first, so a letter typed as ``e`` + a combining
accent is the same slug as the precomposed ``é``.

A tool whose manifest gives no slug gets one from its id (`derive`); one that gives no version
has version ``1`` (`DEFAULT_VERSION`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

from ..api.base import ID_PATTERN

MAX_RUNES = 64
DEFAULT_VERSION = "1"
# What slugs are made of, said once for every error message.
SLUG_RULE = "letters, digits and '-' only (no '_', spaces, '/', punctuation or symbols), at most 64 characters"
VERSION_RULE = "letters, digits, '-' and '.' only (no '_', spaces, '/', punctuation or symbols), at most 64 characters"

_ID_SAFE = re.compile(ID_PATTERN)  # ARCHITECTURE.md's id rule


def _describe(ch: str) -> str:
    name = unicodedata.name(ch, "")
    shown = ch if unicodedata.category(ch)[0] in "LNPS" and ch.isprintable() else ""
    return f"{shown!r} (U+{ord(ch):04X}{' ' + name if name else ''})" if shown else f"U+{ord(ch):04X}" + (
        f" {name}" if name else "")


def _problem(text: str, *, dot: bool) -> str | None:
    if not text:
        return "is empty"
    if len(text) > MAX_RUNES:
        return f"is {len(text)} characters long; the limit is {MAX_RUNES}"
    for ch in text:
        if ch == "-" or (dot and ch == "."):
            continue
        category = unicodedata.category(ch)
        if category[0] == "L" or category == "Nd":
            continue
        if ch == "_":
            return "has '_'; use '-' instead"
        if ch == ".":
            return "has '.'; dots are allowed in versions only"
        if ch in "/\\":
            return f"has {ch!r}; slashes are not allowed"
        if ch.isspace():
            return f"has whitespace ({_describe(ch)})"
        if category == "Cf":
            return f"has the invisible format character {_describe(ch)}, which can make text read differently " \
                   "than it is stored"
        if category[0] == "C":
            return f"has the control character {_describe(ch)}"
        return f"has {_describe(ch)}"
    return None


def check_slug(text: str) -> tuple[str, str | None]:
    """The slug in NFC and, when it breaks the rules, what is wrong (to be followed by the rule)."""
    slug = unicodedata.normalize("NFC", text)
    return slug, _problem(slug, dot=False)


def check_version(text: str) -> tuple[str, str | None]:
    version = unicodedata.normalize("NFC", text)
    return version, _problem(version, dot=True)


@functools.lru_cache(maxsize=4096)  # MCP tools' slugs are made on every listing
def derive(name: str) -> str:
    """The slug of a tool that names none, from its id or name: each character that cannot be in a
    slug becomes '-' (``get_item`` and ``get.item`` -> ``get-item``, ``a b/c`` -> ``a-b-c``), cut to
    64 characters. Character by character, so the slugs migration (store/migrations/*_slugs.sql)
    computes the same in SQL for the ids already stored. A name with no letter or digit at all
    (``___``, ``🙂``) gets ``tool-`` and a short digest of the name, so it still has a slug of its own."""
    text = unicodedata.normalize("NFC", name)
    slug = "".join(ch if (unicodedata.category(ch)[0] == "L" or unicodedata.category(ch) == "Nd") else "-"
                   for ch in text)[:MAX_RUNES]
    if not slug.strip("-"):
        return "tool-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return slug


def local_id(slug: str, version: str) -> str:
    """The tool part of the id (``toolset:<this>``) of a tool put through the API: ``slug.version``
    (a slug has no dot, so the two are read back apart) when that fits the id rule, else the ASCII
    letters and digits of the slug with a digest of the pair. It depends on the pair alone, which
    never changes for a stored tool: which version is current does not move ids, so overrides and
    the audit trail keep pointing at the same tool."""
    plain = f"{slug}.{version}"
    if _ID_SAFE.match(plain):
        return plain
    head = re.sub(r"[^A-Za-z0-9-]+", "", slug).strip("-")[:40] or "tool"
    digest = hashlib.sha256(f"{slug}@{version}".encode()).hexdigest()[:12]
    return f"{head}.{digest}"


MAX_TAGS = 32


def check_tags(tags: list[str]) -> tuple[list[str], str, str | None]:
    """Tags as stored (NFC, trimmed, each once, in order), or where (``[2]``, or "" for the list)
    and what is wrong: a tag is free text of 1-64 characters with no control or format character."""
    if len(tags) > MAX_TAGS:
        return tags, "", f"{len(tags)} tags; the limit is {MAX_TAGS}"
    out: list[str] = []
    for i, raw in enumerate(tags):
        tag = unicodedata.normalize("NFC", raw).strip()
        if not tag or len(tag) > MAX_RUNES:
            return tags, f"[{i}]", f"a tag is 1-{MAX_RUNES} characters"
        bad = next((ch for ch in tag if unicodedata.category(ch)[0] == "C"), None)
        if bad is not None:
            return tags, f"[{i}]", f"has the control or format character {_describe(bad)}"
        if tag not in out:
            out.append(tag)
    return out, "", None


class Ref:
    """What the palette was given: ``+slug`` or ``+slug@version``."""

    __slots__ = ("slug", "version")

    def __init__(self, slug: str, version: str | None) -> None:
        self.slug, self.version = slug, version

    def __str__(self) -> str:
        return f"+{self.slug}" + (f"@{self.version}" if self.version is not None else "")


def parse_ref(text: str) -> Ref | None:
    """``+slug`` / ``+slug@version`` as a Ref; None when ``text`` is not one (a tool id). A
    malformed one raises ValueError with what to fix."""
    if not text.startswith("+"):
        return None
    slug, at, version = text[1:].partition("@")
    slug, problem = check_slug(slug)
    if problem:
        raise ValueError(f"the slug in {text!r} {problem}; a slug is {SLUG_RULE}")
    if not at:
        return Ref(slug, None)
    version, problem = check_version(version)
    if problem:
        raise ValueError(f"the version in {text!r} {problem}; a version is {VERSION_RULE}")
    return Ref(slug, version)
