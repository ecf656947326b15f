"""The paging fields of tools/list, toolsets/list, chats/list and mcpServers/list (their tokens:
``sidecar.paging``)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from .base import Model

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


class PageParams(Model, kw_only=True):
    page_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_SIZE, description=(
        f"Items per page (1-{MAX_PAGE_SIZE}, default {DEFAULT_PAGE_SIZE}). Without a pageToken the first "
        "page: a caller that sends neither gets the first page, and nextPageToken says whether more follow."
    ))] = DEFAULT_PAGE_SIZE
    page_token: Annotated[Annotated[str, msgspec.Meta(max_length=1024)] | None, msgspec.Meta(description=(
        "nextPageToken of the previous page, sent with the same filters (pageSize may change); absent for "
        "the first page. Pages are keyset pages: an item added between two requests is neither repeated "
        "nor skipped by the pages after it. A token of another list, of other filters or a forged one is "
        "InvalidParams (data.path params.pageToken)."))] = None


NextPageToken = Annotated[str | None, msgspec.Meta(description=(
    "Pass it as pageToken for the next page; absent on the last page."))]
