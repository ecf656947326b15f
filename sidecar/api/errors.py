"""The error table of the wire contract: every code and when it is sent.

The exceptions that carry these codes are ``sidecar/errors.py``'s tree; the engine turns any
exception with ``__rpc_error__`` into that wire error.
Codes -32000, -32001, -32096..-32099 and -32801..-32899 belong to other protocols: never use them.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    SERVER_NOT_INITIALIZED = -32002
    NOT_FOUND = -32010
    CONFLICT = -32011
    PERMISSION_DENIED = -32012
    INVALID_BUNDLE = -32013
    UPSTREAM_ERROR = -32020
    # -32021 is retired, never sent: a tool that ran and failed is a toolCall record with status error.
    TIMEOUT = -32022
    STORAGE_ERROR = -32030
    INSTANCE_LOCKED = -32031


# name, code, when it is sent, shape of data (for openrpc.json and protocol/README.md)
ERROR_TABLE: tuple[tuple[str, ErrorCode, str, str], ...] = (
    ("ParseError", ErrorCode.PARSE_ERROR,
     "the line is not JSON we can read: malformed, invalid UTF-8 anywhere in it, or nested deeper than the "
     "parser goes (id null)", ""),
    ("InvalidRequest", ErrorCode.INVALID_REQUEST,
     "bad envelope, batch (a well-formed top-level array), duplicate in-flight id, line too long, request "
     "after shutdown", ""),
    ("MethodNotFound", ErrorCode.METHOD_NOT_FOUND, "unknown method", ""),
    ("InvalidParams", ErrorCode.INVALID_PARAMS, "params fail validation", "{path, reason}"),
    ("InternalError", ErrorCode.INTERNAL_ERROR,
     "unexpected exception; the traceback is only in the log", "{errorId}"),
    ("RequestCancelled", ErrorCode.REQUEST_CANCELLED, "cancelled by the client or by shutdown", ""),
    ("ServerNotInitialized", ErrorCode.SERVER_NOT_INITIALIZED, "request before initialize", ""),
    ("NotFound", ErrorCode.NOT_FOUND, "no such object", "{kind, id}"),
    ("Conflict", ErrorCode.CONFLICT, "duplicate id, turn already running, an MCP server not connected, ...",
     "{reason}; for an MCP server {source, server, message}"),
    ("PermissionDenied", ErrorCode.PERMISSION_DENIED,
     "user denied a tool call, path outside its root, host not allowed", ""),
    ("InvalidBundle", ErrorCode.INVALID_BUNDLE,
     "a toolset bundle or manifest is rejected", "{path, reason}"),
    ("UpstreamError", ErrorCode.UPSTREAM_ERROR,
     "an MCP server or model provider failed", "{source, server?, message}"),
    ("Timeout", ErrorCode.TIMEOUT, "an MCP server did not answer within its call timeout",
     "{source, server, message}"),
    ("StorageError", ErrorCode.STORAGE_ERROR, "SQLite or disk failure", ""),
    ("InstanceLocked", ErrorCode.INSTANCE_LOCKED,
     "another sidecar holds the data directory", "{lockPath, holderPid}"),
)
