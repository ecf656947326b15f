"""What an HTTP tool's response becomes: the part of the body its ``response`` mapping selects, as
JSON or text (the call path checks it against the tool's ``outputSchema``, tools/result_schema.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from .spec import ResponseSpec

EXCERPT = 2000  # characters of an error response's body kept in the error result


class ResultError(Exception):
    """The response cannot become the result; the message says why and where."""


def mapped(body: bytes, encoding: str, spec: ResponseSpec, what: object) -> Any:
    """``body`` as the result ``spec`` asks for; ``what`` names the request in messages (its str())."""
    if spec.format == "text":
        return body.decode(encoding, errors="replace")
    if not body.strip():
        return None  # 204 No Content and friends: nothing, not an error
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise ResultError(f"{what} did not answer with JSON ({exc}); it began with "
                          f"{body[:80].decode(encoding, errors='replace')!r}. If the API answers text, "
                          "set response.format: text") from None
    return select(data, spec.select, what) if spec.select else data


def select(data: Any, pointer: str, what: object) -> Any:
    """The value at a JSON Pointer (RFC 6901)."""
    value = data
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise ResultError(f"{what}: the response has nothing at {pointer} (response.select); "
                              f"it stops before {key!r}")
    return value


def excerpt(body: bytes, encoding: str) -> Any:
    """An error response's body for the error result: its JSON when it is JSON, else the start of its text."""
    try:
        return msgspec.json.decode(body) if len(body) <= 4 * EXCERPT else None
    except msgspec.DecodeError:
        pass
    text = body[: 4 * EXCERPT].decode(encoding, errors="replace")
    return text[:EXCERPT] + ("..." if len(text) > EXCERPT else "")
