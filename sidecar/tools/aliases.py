"""Provider-safe aliases: every model provider gets each tool under a name matching
``^[a-zA-Z0-9_-]{1,64}$``, readable and unique within one turn; the turn keeps the way back."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")
MAX_ALIAS = 64


def alias_for(tool_id: str) -> str:
    """``mcp:docs~search:query`` -> ``docs_search_query``: readable, ``^[a-zA-Z0-9_-]{1,64}$``."""
    alias = _UNSAFE.sub("_", tool_id.removeprefix("mcp:")).strip("_") or "tool"
    return alias[:MAX_ALIAS]


class Aliases:
    """Hands out aliases that no other tool of the same turn has (``name``, ``name_2``, ...)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def unique(self, name: str) -> str:
        alias = alias_for(name)
        n = 2
        candidate = alias
        while candidate in self._taken:
            suffix = f"_{n}"
            candidate = alias[:MAX_ALIAS - len(suffix)] + suffix
            n += 1
        self._taken.add(candidate)
        return candidate
