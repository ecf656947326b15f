"""tools/search: the tool catalog searched and ranked as seed 002 says."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import Id, MethodSpec, Model
from .errors import ErrorCode
from .pages import MAX_PAGE_SIZE, NextPageToken
from .tools import Tool

SearchMatch = Literal["prefix", "word", "fuzzy", "recent"]
MAX_QUERY = 16_384  # characters: a pasted page still searches; beyond, InvalidParams


class SearchToolsParams(Model):
    q: Annotated[str, msgspec.Meta(max_length=MAX_QUERY, description=(
        "What the user typed. Cut into words (runs of letters and digits; '_', '-', ':' and other marks "
        "separate them, and are never query syntax); a misspelt word also finds the words of the catalog "
        "nearest to it, and common English words (the, me, what, on) weigh nothing beside the others; "
        "empty, or without a letter or digit: every tool, most recently modified first."))]
    include_disabled: Annotated[bool, msgspec.Meta(description=(
        "Also disabled tools (switched off, or their toolset disabled)."))] = False
    toolset_ids: Annotated[Annotated[list[Id], msgspec.Meta(max_length=1000)] | None, msgspec.Meta(description=(
        "Only tools of these toolsets (\"builtin\" names the built-in tools)."))] = None
    page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_SIZE, description="Hits per page (1-500).")] = 50
    page_token: Annotated[Annotated[str, msgspec.Meta(max_length=1024)] | None, msgspec.Meta(description=(
        "nextPageToken of the previous page, with the same q and filters; absent for the first page."))] = None


class SearchTerm(Model):
    query: Annotated[str, msgspec.Meta(description="A word of the query, case and accents folded.")]
    term: Annotated[str, msgspec.Meta(description=(
        "The word of the tool it matched: the same word, the word it was corrected to (query 'weathr', "
        "term 'weather'), or the word it was found inside (query 'arch', term 'search')."))]


class SearchHit(Model):
    tool: Annotated[Tool, msgspec.Meta(description="The tool as tools/list shows it.")]
    match: Annotated[SearchMatch, msgspec.Meta(description=(
        "Why it matched, best first: prefix (its slug, id, name or display name begins with the query, "
        "the last word possibly unfinished), word (every query word that counts, common English words "
        "aside, is a whole word of its slug, id, name, display name, description, tags or parameters), "
        "fuzzy (found otherwise: by some of the query's words only, by a misspelt word's correction, or "
        "inside a word: three or more characters anywhere, shorter ones at the start of a word), recent "
        "(an empty query)."))]
    matched: Annotated[list[SearchTerm], msgspec.Meta(description=(
        "Which query words it holds and as which of its words; empty for recent, or when only the "
        "query's common words matched."))] = []
    score: Annotated[float, msgspec.Meta(ge=0, description=(
        "Relevance within its tier (bm25 over the query's words and their corrections: names weigh "
        "most, then title, tags, description, parameters; rare words more than common ones); higher is "
        "better, comparable within one query only; 0 for recent, or a hit found inside a word only."))] = 0.0


class SearchToolsResult(Model):
    hits: Annotated[list[SearchHit], msgspec.Meta(description=(
        "Ranked: prefix, then word, then fuzzy hits; within each, the most relevant first (score), then "
        "the most recently modified (modifiedAt), then the most called (callCount), then by id."))]
    next_page_token: NextPageToken = None


SPECS = (
    MethodSpec("tools/search", "clientToServer", "request",
               "Search every provider's tools (built-in, Python, HTTP, and MCP tools while their server lists "
               "them) by slug, id, name, display name, description, tags and parameters, tolerating typos; "
               "each hit says why it matched. "
               "Disabled tools only with includeDisabled.",
               params=SearchToolsParams, result=SearchToolsResult,
               errors=(ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR)),
)
