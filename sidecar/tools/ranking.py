"""How tools are ranked for a piece of text (seed 004 "Tool Relevance Service"): the one interface
between what ranks (lexical BM25, a local sentence-embedding model, both fused) and what uses a
ranking (``tools/relevant``, the tools a chat turn offers, ``find_tools``).

A ranker answers the best tools first with a score in [0, 1] and a short reason a UI can show.
It never raises for what the user typed: text without a word it knows ranks nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, Protocol

# lexical: BM25 over the tools' text; embedding: the sentence-embedding model's cosine; fused: both.
Mode = Literal["lexical", "embedding", "fused"]


@dataclass(frozen=True, slots=True)
class Ranked:
    tool_id: str
    score: float  # in [0, 1], higher is more relevant; comparable within one answer only
    why: str  # worded for the user: which words matched, how close in meaning


class Ranker(Protocol):
    async def rank(self, text: str, *, limit: int, tool_ids: Collection[str] | None = None,
                   mode: Mode = "fused") -> list[Ranked]:
        """Up to ``limit`` tools, best first, above the relevance threshold. ``tool_ids``: rank only
        these (the tools a chat may offer); None: every enabled tool of every provider."""
        ...
