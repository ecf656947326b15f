"""The JSON-RPC 2.0 engine: NDJSON framing, dispatch, cancellation, server-to-client requests.

This package knows method names only as strings and params only as ``msgspec.Raw`` until a
registered decoder types them. It imports nothing else from ``sidecar`` but ``sidecar/ndjson.py``,
the framing leaf it shares with the toolset worker's client and the spawner, so it can be tested
alone over in-memory streams.
"""

from ..ndjson import LineSplitter, LineTooLong
from .connection import Connection
from .context import RequestContext
from .envelope import Verbatim
from .errors import ConnectionClosed, RemoteError, RpcError
from .methods import MethodTable
from .transport import MemoryTransport, StdioTransport, Transport, memory_pair

__all__ = [
    "Connection",
    "ConnectionClosed",
    "LineSplitter",
    "LineTooLong",
    "MemoryTransport",
    "MethodTable",
    "RemoteError",
    "RequestContext",
    "RpcError",
    "StdioTransport",
    "Transport",
    "Verbatim",
    "memory_pair",
]
