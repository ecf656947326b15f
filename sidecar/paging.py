"""Opaque page tokens, the same on every paged list (``toolCalls/list``, ``tools/list``, ...).

A token carries where the previous page ended (a keyset position, so rows inserted meanwhile are
neither repeated nor skipped), the method it was made by and a digest of the filters it was made
for. It is not signed: a forged one can only name a position in a list the caller may read
anyway, and its position is type-checked like any other input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from .errors import InvalidParams

_PATH = "params.pageToken"

P = TypeVar("P")
T = TypeVar("T")


class Pages(Generic[P]):
    """The tokens of one method under one set of filters; ``P`` is the position's type (a tuple
    of the sort key's values, e.g. ``tuple[str, str]`` for (started_at, id))."""

    def __init__(self, method: str, filters: Any, position: type[P]) -> None:
        self.method = method
        self.digest = hashlib.sha256(msgspec.json.encode(filters)).hexdigest()[:12]
        self.position = position

    def token(self, position: P) -> str:
        raw = msgspec.json.encode([self.method, self.digest, position])
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def after(self, token: str | None) -> P | None:
        """Where the page asked for starts (None: the first page); a bad token is InvalidParams."""
        if token is None:
            return None
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            method, made_for, position = msgspec.json.decode(raw, type=tuple[str, str, Any])
        except (binascii.Error, ValueError, msgspec.DecodeError):
            raise InvalidParams(_PATH, f"not a page token of {self.method}; pass the nextPageToken it gave, "
                                       "or none for the first page") from None
        if method != self.method:
            raise InvalidParams(_PATH, f"this page token was made by {method[:64]!r}, not {self.method}; pass "
                                       f"the nextPageToken {self.method} gave, or none for the first page")
        if made_for != self.digest:
            raise InvalidParams(_PATH, "this page token was made for other filters; keep the filters of the "
                                       "first page, or start again without a pageToken")
        try:
            return msgspec.convert(position, self.position)
        except msgspec.ValidationError:
            raise InvalidParams(_PATH, f"not a page token of {self.method}; pass the nextPageToken it gave, "
                                       "or none for the first page") from None

    def page(self, rows: list[T], size: int, position_of: Callable[[T], P]) -> tuple[list[T], str | None]:
        """``rows``: up to ``size + 1`` rows read from the position; the page and the next token."""
        if len(rows) <= size:
            return rows, None
        rows = rows[:size]
        return rows, self.token(position_of(rows[-1]))
