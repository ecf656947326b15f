"""initialize, ping, shutdown and exit: served from the first byte, before any service exists."""

from __future__ import annotations

from typing import Any, Protocol

from .. import __version__
from ..api.base import Empty
from ..api.lifecycle import (
    PROTOCOL_VERSION,
    SERVER_REQUESTS,
    InitializeParams,
    InitializeResult,
    SandboxCapability,
    ServerCapabilities,
    ServerInfo,
)
from ..errors import Conflict
from ..process import EXIT_OK, EXIT_WITHOUT_SHUTDOWN
from ..rpc import RequestContext
from ..sandbox.detect import Detected
from ..settings import Settings
from .routes import method

_EMPTY = Empty()


class Lifecycle(Protocol):
    """What the process lifecycle (``app.Sidecar``) offers these handlers."""

    settings: Settings
    tools_enabled: bool  # the kill switch as stored, read before the first answer

    def watch_parent(self, pid: int) -> None: ...
    async def sandbox_status(self) -> Detected: ...
    def initialized(self) -> None: ...
    async def shutdown(self, exclude: Any = None) -> None: ...
    def request_stop(self, reason: str, code: int) -> None: ...


class LifecycleHandlers:
    def __init__(self, app: Lifecycle) -> None:
        self.app = app

    @method("initialize")
    async def initialize(self, params: InitializeParams, ctx: RequestContext) -> InitializeResult:
        if ctx.connection.initialized:
            raise Conflict("already initialized", "initialize was already called on this connection")
        if params.process_id:
            self.app.watch_parent(params.process_id)
        ctx.after_answer(self.app.initialized)
        sandbox = await self.app.sandbox_status()  # the last start's record while it applies: no wait
        return InitializeResult(
            protocol_version=PROTOCOL_VERSION,
            server_info=ServerInfo(name="covalt-sidecar", version=__version__),
            capabilities=ServerCapabilities(
                max_line_bytes=self.app.settings.max_line_bytes,
                cancellation=["$/cancelRequest"],
                tools_enabled=self.app.tools_enabled,
                server_requests=list(SERVER_REQUESTS),
                secrets_backend=self.app.settings.recorded_secrets_backend(),
                sandbox=SandboxCapability(mechanism=sandbox.mechanism, confined=sandbox.confined),
            ),
            data_dir=str(self.app.settings.data_dir),
        )

    @method("ping")
    async def ping(self, params: None, ctx: RequestContext) -> Empty:
        return _EMPTY

    @method("shutdown")
    async def shutdown(self, params: None, ctx: RequestContext) -> None:
        await self.app.shutdown(exclude=ctx.id)

    @method("exit")
    async def exit(self, params: None, ctx: RequestContext) -> None:
        # The engine stops accepting requests when it *receives* shutdown, so a client that
        # pipelines exit right behind shutdown still gets the clean stop it asked for.
        clean = not ctx.connection.accepting  # a shutdown was received (or is under way)
        self.app.request_stop("exit", EXIT_OK if clean else EXIT_WITHOUT_SHUTDOWN)
