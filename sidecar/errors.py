"""The one exception tree: everything the sidecar raises on purpose, and the wire error each becomes.

    SidecarError                 any deliberate failure; on the wire InternalError (-32603) unless below
    ├── InvalidParams            -32602  data {path, reason}: params or a tool's arguments fail a check
    │   └── PathRejected                 a workspace path that is empty, absolute, has '..', NUL, ...
    ├── NotFound                 -32010  data {kind, id}
    ├── Conflict                 -32011  data {reason}: duplicate id, a turn already running, ...
    │   └── NotConfigured                a tool whose required config has no value; data also
    │                                    {toolsetId, toolId, missing}
    ├── PermissionDenied         -32012  the user said no, a path outside its root, a host not allowed
    │   ├── ToolsSwitchedOff             the user's kill switch (settings toolsEnabled false) is off;
    │   │                                data {reason: "toolsOff"}
    │   └── DestinationRefused           an HTTP tool's request (or a redirect) to a host outside its
    │                                    allowedHosts or to a non-public address; data {host, port,
    │                                    address, reason, allow}
    ├── InvalidBundle            -32013  data {path, reason}: path is inside the bundle
    │   ├── BundleError                  the folder or ZIP (limits, names, entries)
    │   └── ManifestError                toolset.yaml (path is where in it: tools[2].entrypoint)
    ├── UpstreamError            -32020  data {source, server?, message}: an MCP server or model provider
    │   ├── McpError                     a request to an MCP server failed (kind says how); with the same
    │   │                                data, kind timeout is sent as Timeout (-32022), not_connected as
    │   │                                Conflict (data also {reason: "not connected"})
    │   ├── ProviderError                a model provider failed (status, retryable)
    │   └── SignInFailed                 an OAuth sign-in to an MCP server failed (kind: refused, timeout,
    │                                    cancelled); kind timeout is sent as Timeout (-32022)
    ├── StorageError             -32030  SQLite or disk
    │   └── MissingBlob                  a blob a manifest names is gone from the store
    └── InstanceLocked           -32031  data {lockPath, holderPid}

``api/errors.py`` holds the codes and the published table; the engine turns any exception with
``__rpc_error__`` into that wire error, so it never imports this module. Outside the tree on purpose:
``rpc/errors.py`` (the engine knows no domain), the tool worker's own errors (another process), the
tool SDK's ``ArgumentError`` (the author's side), and the test client's. A tool that ran and failed
is not an exception: its ``toolCall`` record says ``status: error`` (with ``errorKind``), and the
request that ran it succeeds.
"""

from __future__ import annotations

from typing import Any, Literal

from .api.errors import ErrorCode


class SidecarError(Exception):
    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def __rpc_error__(self) -> tuple[int, str, Any]:
        return int(self.code), self.message, self.data


class InvalidParams(SidecarError):
    code = ErrorCode.INVALID_PARAMS

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid params: {path}: {reason}", {"path": path, "reason": reason})
        self.path = path
        self.reason = reason


class PathRejected(InvalidParams):
    """``str()`` is the reason alone: callers name the parameter (``params.path``) it came from."""

    def __init__(self, reason: str, path: str = "path") -> None:
        super().__init__(path, reason)

    def __str__(self) -> str:
        return self.reason


class NotFound(SidecarError):
    code = ErrorCode.NOT_FOUND

    def __init__(self, kind: str, id: str, message: str | None = None) -> None:
        super().__init__(message or f"no {kind} with id {id!r}", {"kind": kind, "id": id})


class Conflict(SidecarError):
    code = ErrorCode.CONFLICT

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(message or reason, {"reason": reason})


class NotConfigured(Conflict):
    """A tool (status ``available``) was called before its required config keys got a value; the
    message names them and the ``config/set`` request that sets them."""

    def __init__(self, message: str, *, toolset_id: str, tool_id: str, missing: list[str]) -> None:
        super().__init__("not configured", message)
        assert self.data is not None
        self.data |= {"toolsetId": toolset_id, "toolId": tool_id, "missing": missing}
        self.missing = missing


class PermissionDenied(SidecarError):
    code = ErrorCode.PERMISSION_DENIED


class ToolsSwitchedOff(PermissionDenied):
    """The user switched every tool off (``settings/set {toolsEnabled: false}``): no tool call
    starts, whoever asks (``tools/call``, the "+" palette, a model, a schedule)."""

    MESSAGE = ("tools are switched off by the user; no tool runs until they are switched on again "
               "(settings/set with toolsEnabled: true)")

    def __init__(self) -> None:
        super().__init__(self.MESSAGE, {"reason": "toolsOff"})


class DestinationRefused(PermissionDenied):
    """Where an HTTP tool's request would go is not allowed (tools/providers/http/guard.py). The
    message names the host, the address (None when the name was not looked up), and the entry
    ``allow`` to add to allowedHosts; ``reason`` is ``notAllowed``, ``scheme`` or the address's class
    (``loopback``, ``private``, ``metadata``, ...)."""

    def __init__(self, message: str, *, host: str, port: int | None, address: str | None, reason: str,
                 allow: str | None) -> None:
        super().__init__(message, {"host": host, "port": port, "address": address, "reason": reason,
                                   "allow": allow})
        self.host = host
        self.address = address
        self.reason = reason
        self.allow = allow


class InvalidBundle(SidecarError):
    code = ErrorCode.INVALID_BUNDLE

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"invalid toolset bundle: {path}: {reason}" if path else f"invalid toolset bundle: {reason}",
                         {"path": path, "reason": reason})
        self.path = path
        self.reason = reason


class BundleError(InvalidBundle):
    """``str()`` is ``path: reason``; ``path`` is a file inside the bundle, optionally with ``: place``."""

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class ManifestError(BundleError):
    """``path`` is where in the manifest (``tools[2].entrypoint``); ``reason`` what to fix."""


class UpstreamError(SidecarError):
    code = ErrorCode.UPSTREAM_ERROR

    def __init__(self, source: str, message: str, server: str | None = None) -> None:
        data = {"source": source, "message": message} | ({"server": server} if server else {})
        super().__init__(f"{server or source}: {message}", data)


McpErrorKind = Literal["not_connected", "timeout", "server", "disconnected", "too_large", "elicitation"]


class McpError(UpstreamError):
    """A request to an MCP server failed. ``message`` is the reason alone; ``server`` is the server's
    key (``toolset~server``), in the wire data too.

    `kind` (it also picks the wire code: UpstreamError unless said otherwise):
    - ``not_connected``: the server is not connected (starting, failed, disabled or unknown); Conflict;
    - ``timeout``: no answer within the call timeout (the request was cancelled toward the server); Timeout;
    - ``server``: the server answered with a JSON-RPC error (``server_code``, ``server_data`` carry it)
      or an invalid result;
    - ``disconnected``: the connection ended while the request was pending;
    - ``too_large``: the result is larger than the host's cap;
    - ``elicitation``: the server asked the user during the request and the answer did not fit its form
      (the server was told ``cancel``).
    """

    _CODES: dict[McpErrorKind, ErrorCode] = {"timeout": ErrorCode.TIMEOUT, "not_connected": ErrorCode.CONFLICT}

    def __init__(self, kind: McpErrorKind, message: str, *, server: str, server_code: int | None = None,
                 server_data: Any = None) -> None:
        super().__init__("mcp", message, server)
        self.code = self._CODES.get(kind, ErrorCode.UPSTREAM_ERROR)
        if self.code == ErrorCode.CONFLICT and self.data is not None:
            self.data["reason"] = "not connected"  # what every Conflict's data says
        self.kind: McpErrorKind = kind
        self.server = server
        self.message = message
        self.server_code = server_code  # the server's own JSON-RPC error: never ours on the wire
        self.server_data = server_data

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"McpError({self.kind!r}, {self.message!r})"


class ProviderError(UpstreamError):
    """The provider failed. ``status`` is the HTTP status when there was one; ``retryable`` says
    whether trying again later could help (429, 5xx, a cut connection). ``message`` is the reason alone."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__("provider", message)
        self.message = message
        self.status = status
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message


class StorageError(SidecarError):
    code = ErrorCode.STORAGE_ERROR


class MissingBlob(StorageError):
    def __init__(self, sha256: str, path: Any) -> None:
        super().__init__(f"blob {sha256} is missing from {path}")
        self.sha256 = sha256
        self.path = path


class InstanceLocked(SidecarError):
    code = ErrorCode.INSTANCE_LOCKED

    def __init__(self, lock_path: str, holder_pid: int | None) -> None:
        holder = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(
            f"the data directory is in use by {holder} (lock {lock_path}); "
            "close the other instance or start with a different --data-dir",
            {"lockPath": lock_path, "holderPid": holder_pid},
        )
        self.lock_path = lock_path
        self.holder_pid = holder_pid


class SignInFailed(UpstreamError):
    """Signing in to an MCP server (OAuth) did not succeed; nothing was stored. ``message`` is the
    reason alone, for the user; ``server`` the server's key. ``kind``: ``refused`` (the authorization
    server, its answer or its endpoints were refused), ``timeout`` (the user or an endpoint took too
    long; sent as Timeout), ``cancelled`` (the UI did not open the page)."""

    def __init__(self, kind: Literal["refused", "timeout", "cancelled"], message: str, *, server: str) -> None:
        super().__init__("oauth", message, server)
        if kind == "timeout":
            self.code = ErrorCode.TIMEOUT
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return self.message
