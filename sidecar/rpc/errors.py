"""Errors the engine itself raises or turns into wire errors.

Any exception with a ``__rpc_error__()`` method returning ``(code, message, data)`` becomes that wire
error; this is how domain errors defined outside the engine reach the wire without the engine
importing them. Everything else is an internal error.
"""

from __future__ import annotations

from typing import Any, cast

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800


class RpcError(Exception):
    """An error to send as is: code, message, optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __rpc_error__(self) -> tuple[int, str, Any]:
        return self.code, self.message, self.data


class RemoteError(RpcError):
    """The peer answered one of our requests with an error."""


class InvalidResponse(RemoteError):
    """The peer answered one of our requests with a result that does not fit the expected type."""


class ConnectionClosed(RpcError):
    """The peer went away before answering."""

    def __init__(self, message: str = "the client closed the connection") -> None:
        super().__init__(INTERNAL_ERROR, message)


def wire_error(exc: BaseException) -> tuple[int, str, Any] | None:
    """``(code, message, data)`` for an exception that knows its wire error (also when it is the one
    exception of a group); None for any other: an internal error."""
    while (member := _sole_member(exc)) is not None:
        exc = member
    to_wire = getattr(exc, "__rpc_error__", None)
    return to_wire() if to_wire is not None else None


def _sole_member(exc: BaseException) -> BaseException | None:
    if not isinstance(exc, BaseExceptionGroup):
        return None
    members = cast("BaseExceptionGroup[BaseException]", exc).exceptions
    return members[0] if len(members) == 1 else None
