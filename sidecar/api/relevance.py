"""tools/relevant: which tools fit a piece of text, with scores, so a UI can explain a choice."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode
from .search import MAX_QUERY
from .tools import Tool

MAX_RELEVANT = 100


class RelevantToolsParams(Model):
    text: Annotated[str, msgspec.Meta(max_length=MAX_QUERY, description=(
        "What to find tools for: a message, or the conversation so far (at most 16,384 characters; the "
        "embedding model reads its first 256 word pieces). Text without a word (emoji, marks) ranks nothing."))]
    chat_id: Annotated[str | None, msgspec.Meta(description=(
        "Rank only the tools a turn of this chat could offer: every enabled tool plus what its active branch "
        "attached (tools/list with chatId). Absent: every enabled tool of every provider."))] = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_RELEVANT, description=(
        "The most tools answered (1-100)."))] = 10
    mode: Annotated[Literal["fused", "lexical", "embedding"], msgspec.Meta(description=(
        "Which ranking: fused (the default, what a turn uses), lexical (words only) or embedding (meaning "
        "only); the two halves let a UI or a benchmark see what each contributes. embedding without a usable "
        "model ranks by words, as fused does (ranking and fallbackReason say so)."))] = "fused"


class RelevantTool(Model):
    tool: Annotated[Tool, msgspec.Meta(description=(
        "The tool as tools/list shows it (with chatId: as that chat shows it)."))]
    score: Annotated[float, msgspec.Meta(ge=0, le=1, description=(
        "How relevant, in [0, 1], higher first; comparable within one answer only. Fused ranking: reciprocal-"
        "rank fusion of the word and the meaning rankings, 1 for a tool first in both; by words only: the "
        "lexical score."))]
    why: Annotated[str, msgspec.Meta(description=(
        "Why it ranks, worded for the user: the words it shares with the text, and how close in meaning it is "
        "(the cosine of the two embeddings)."))]


class RelevantToolsResult(Model):
    tools: Annotated[list[RelevantTool], msgspec.Meta(description=(
        "The most relevant tools, best first, only those above the relevance threshold (a cosine of 0.2 "
        "for meaning; for words, sharing a word with the text); empty when nothing fits."))]
    ranking: Annotated[Literal["fused", "lexical", "embedding"], msgspec.Meta(description=(
        "How they were ranked: as mode asked, or lexical (words only) when the embedding model is "
        "unavailable (fallbackReason says why)."))]
    fallback_reason: Annotated[str | None, msgspec.Meta(description=(
        "Why the embedding model did not rank (ranking lexical though mode asked for it); absent otherwise."))] = None


SPECS = (
    MethodSpec("tools/relevant", "clientToServer", "request",
               "Rank the tools for a text (seed 004 tool relevance): words shared with each tool's name, title, "
               "description, parameters and tags, fused with a local sentence-embedding model's similarity; "
               "the tools a turn would offer for that text, best first, each with a score and a reason.",
               params=RelevantToolsParams, result=RelevantToolsResult,
               errors=(ErrorCode.INVALID_PARAMS, ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR)),
)
