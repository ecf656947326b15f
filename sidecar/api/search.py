"""tools/search: the tool catalog searched and ranked as seed 002 says."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import Id, MethodSpec, Model
from .errors import ErrorCode
from .pages import MAX_PAGE_SIZE, NextPageToken
from .toolsets import Tool

SearchMatch = Literal["prefix", "word", "fuzzy", "recent"]
MAX_QUERY = 16_384  # characters: a pasted page still searches; beyond, InvalidParams


class SearchToolsParams(Model):
    q: Annotated[str, msgspec.Meta(max_length=MAX_QUERY, description=(
        "What the user typed. Cut into words (runs of letters and digits; '_', '-', ':' and other marks "
        "separate them, and are never query syntax); empty, or without a letter or digit: every tool, "
        "most recently modified first."))]
    include_disabled: Annotated[bool, msgspec.Meta(description=(
        "Also disabled tools (switched off, or their toolset disabled)."))] = False
    toolset_ids: Annotated[Annotated[list[Id], msgspec.Meta(max_length=1000)] | None, msgspec.Meta(description=(
        "Only tools of these toolsets (\"builtin\" names the built-in tools)."))] = None
    page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_SIZE, description="Hits per page (1-500).")] = 50
    page_token: Annotated[Annotated[str, msgspec.Meta(max_length=1024)] | None, msgspec.Meta(description=(
        "nextPageToken of the previous page, with the same q and filters; absent for the first page."))] = None


class SearchHit(Model):
    tool: Annotated[Tool, msgspec.Meta(description="The tool as tools/list shows it.")]
    match: Annotated[SearchMatch, msgspec.Meta(description=(
        "Why it matched, best first: prefix (its slug, id, name or display name begins with the query, "
        "the last word possibly unfinished), word (every query word is a whole word of its slug, id, name, "
        "display name, description or tags), fuzzy (every query word is found inside them: three or more "
        "characters anywhere, shorter ones at the start of a word), recent (an empty query)."))]


class SearchToolsResult(Model):
    hits: Annotated[list[SearchHit], msgspec.Meta(description=(
        "Ranked: prefix, then word, then fuzzy hits; within each, the most recently modified first "
        "(modifiedAt), then the most called (callCount), then by id."))]
    next_page_token: NextPageToken = None


SPECS = (
    MethodSpec("tools/search", "clientToServer", "request",
               "Search every provider's tools (built-in, Python, HTTP, and MCP tools while their server lists "
               "them) by slug, id, name, display name, description and tags; each hit says why it matched. "
               "Disabled tools only with includeDisabled.",
               params=SearchToolsParams, result=SearchToolsResult,
               errors=(ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR)),
)
