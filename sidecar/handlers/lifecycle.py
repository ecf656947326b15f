from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import __version__
from ..api.errors import Conflict
from ..api.lifecycle import (
    PROTOCOL_VERSION,
    InitializeParams,
    InitializeResult,
    ServerCapabilities,
    ServerInfo,
)
from ..api.base import Empty
from ..process import EXIT_OK, EXIT_WITHOUT_SHUTDOWN
from ..rpc import RequestContext

if TYPE_CHECKING:
    from ..app import Sidecar

_EMPTY = Empty()


def handlers(app: Sidecar) -> dict[str, Any]:
    async def initialize(params: InitializeParams, ctx: RequestContext) -> InitializeResult:
        if ctx.connection.initialized:
            raise Conflict("already initialized", "initialize was already called on this connection")
        if params.process_id:
            app.watch_parent(params.process_id)
        return InitializeResult(
            protocol_version=PROTOCOL_VERSION,
            server_info=ServerInfo(name="covalt-sidecar", version=__version__),
            capabilities=ServerCapabilities(
                max_line_bytes=app.settings.max_line_bytes,
                cancellation=["$/cancelRequest"],
                server_requests=app.server_requests(),
            ),
            data_dir=str(app.settings.data_dir),
        )

    async def ping(params: None, ctx: RequestContext) -> Empty:
        return _EMPTY

    async def shutdown(params: None, ctx: RequestContext) -> None:
        await app.shutdown(exclude=ctx.id)

    async def exit_(params: None, ctx: RequestContext) -> None:
        # The engine stops accepting requests when it *receives* shutdown, so a client that
        # pipelines exit right behind shutdown still gets the clean stop it asked for.
        clean = app.shutdown_requested or not ctx.connection.accepting
        app.request_stop("exit", EXIT_OK if clean else EXIT_WITHOUT_SHUTDOWN)

    return {"initialize": initialize, "ping": ping, "shutdown": shutdown, "exit": exit_}
