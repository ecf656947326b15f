"""The override layer (seed 001) applied on read, the same way for every provider's tools.

An override is stored under the key of one tool (``toolset:tool`` for a stored tool, ``server:tool``
for an MCP tool) or under a pattern of such keys (seed 001 "Future"): ``*`` stands for any run of
characters but ``:``, ``?`` for one such character, nothing else is special (no ``[...]``), and
case counts, as in ids. ``fs:*`` is every tool of the server ``fs``, ``*:read_*`` every tool whose
name starts with ``read_``, from any server or the toolset's own tools; a pattern applies only
inside its toolset. A tool's overrides are layered field by field: the matching patterns from the
least specific to the most specific (more literal characters, then fewer wildcards, then the
pattern's text), then the tool's exact override; each field the later one sets wins.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

import msgspec

from ..api.tools import Tool
from ..store.toolsets import OVERRIDE_FIELDS, OverrideRow

WILDCARDS = frozenset("*?")
_PART = re.compile(r"[A-Za-z0-9._*?-]{1,64}")


class Layered(NamedTuple):
    """One tool's overrides combined, and the keys and patterns that set something in it (the most
    specific first: the exact key, then the patterns by specificity)."""

    override: OverrideRow | None
    applied: list[str]


def is_pattern(key: str) -> bool:
    return any(c in WILDCARDS for c in key)


def pattern_problem(key: str) -> str | None:
    """What is wrong with a pattern key (``part:part``), or None."""
    left, sep, right = key.partition(":")
    if not sep or ":" in right:
        return "a pattern is two parts joined by one ':' (server:tool, toolset:tool): e.g. fs:* or *:read_*"
    for part in (left, right):
        if not _PART.fullmatch(part):
            return (f"{part!r} may only hold letters, digits, '.', '_', '-' and the wildcards * (any run) and "
                    "? (one character), at most 64 of them")
    return None


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile("".join("[^:]*" if c == "*" else "[^:]" if c == "?" else re.escape(c) for c in pattern))


def matches(pattern: str, key: str) -> bool:
    return _regex(pattern).fullmatch(key) is not None


def _specificity(pattern: str) -> tuple[int, int, str]:
    wild = sum(c in WILDCARDS for c in pattern)
    return len(pattern) - wild, -wild, pattern


def _sets_something(o: OverrideRow) -> bool:
    return any(getattr(o, f) is not None for f in OVERRIDE_FIELDS)


def layer(exact: OverrideRow | None, patterns: list[OverrideRow], key: str) -> Layered:
    """``key``'s overrides combined: the matching ``patterns`` (overrides stored under a pattern)
    under its ``exact`` one, field by field."""
    found = sorted((p for p in patterns if matches(p.tool_id, key) and _sets_something(p)),
                   key=lambda p: _specificity(p.tool_id))
    if exact is not None and _sets_something(exact):
        found.append(exact)
    if not found:
        return Layered(exact, [])
    if len(found) == 1:
        return Layered(found[0], [found[0].tool_id])
    fields = {f: v for o in found for f in OVERRIDE_FIELDS if (v := getattr(o, f)) is not None}
    origin = "user" if any(o.origin == "user" for o in found) else "manifest"
    return Layered(OverrideRow(tool_id=key, origin=origin, **fields), [o.tool_id for o in reversed(found)])


def switched_on(o: OverrideRow | None) -> bool:
    """Whether the user's override leaves the tool on (no override, or one that does not say off)."""
    return o is None or o.enabled is None or o.enabled


def apply(tool: Tool, o: OverrideRow | None, applied: list[str] | None = None) -> Tool:
    """The tool with its override applied field by field: each field the override sets wins,
    every other keeps the tool's own value; a tool switched off by it is not enabled. ``applied``:
    the keys and patterns the override was combined from (`layer`), shown on the tool."""
    if o is None:
        return tool
    return msgspec.structs.replace(
        tool,
        name=o.name_override or tool.name,
        description=o.description_override or tool.description,
        requires_confirmation=(o.requires_confirmation if o.requires_confirmation is not None
                               else tool.requires_confirmation),
        enabled=tool.enabled and switched_on(o),
        renderer=o.renderer or tool.renderer,
        renderer_config=o.renderer_config if o.renderer_config is not None else tool.renderer_config,
        overrides_applied=applied if applied is not None else [o.tool_id] if _sets_something(o) else [],
    )
