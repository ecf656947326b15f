"""The one exception the host raises at its callers."""

from __future__ import annotations

from typing import Any, Literal

McpErrorKind = Literal["not_connected", "timeout", "server", "disconnected", "too_large", "elicitation"]


class McpError(Exception):
    """A request to an MCP server failed.

    `kind`:
    - ``not_connected``: the server is not connected (starting, failed, disabled or unknown);
    - ``timeout``: no answer within the call timeout (the request was cancelled toward the server);
    - ``server``: the server answered with a JSON-RPC error (`code`, `data` carry it) or an invalid result;
    - ``disconnected``: the connection ended while the request was pending;
    - ``too_large``: the result is larger than the host's cap;
    - ``elicitation``: the server asked the user during the request and the answer did not fit its form
      (the server was told ``cancel``).
    """

    def __init__(self, kind: McpErrorKind, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.kind: McpErrorKind = kind
        self.message = message
        self.code = code
        self.data = data

    def __repr__(self) -> str:
        return f"McpError({self.kind!r}, {self.message!r})"
