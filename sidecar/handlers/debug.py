"""debug/*: what a developer at the REPL or a bench asks the process about itself."""

from __future__ import annotations

import gc
import os
import sys
import time

import anyio

from .. import __version__
from ..api.debug import (
    ChildEnvironmentInfo,
    DebugInfo,
    RaiseParams,
    RelevanceModelInfo,
    RoundTripParams,
    RoundTripResult,
    SandboxInfo,
    SleepParams,
    SleepResult,
)
from ..errors import InvalidParams
from ..process import rss_bytes
from ..rpc import RequestContext
from ..sandbox.runner import Sandbox
from ..secrets import inherited
from ..secrets.store import SecretStore
from ..settings import Settings
from ..store import Database
from ..tools.relevance import Relevance
from ..tools.switch import ToolSwitch
from .routes import method

HEAVY_MODULES = ("numpy", "onnxruntime", "tokenizers",  # the relevance model's, loaded after start
                 "mcp", "pydantic", "openai", "anthropic", "watchfiles", "httpx", "httpx2", "nh3", "yaml", "keyring")


class DebugRaised(RuntimeError):
    """debug/raise: an unexpected exception on purpose, to see how the wire reports one."""


class DebugHandlers:
    def __init__(self, settings: Settings, db: Database, started_at: float, secrets: SecretStore,
                 switch: ToolSwitch, sandbox: Sandbox, relevance: Relevance | None = None) -> None:
        self.relevance = relevance
        self.switch = switch
        self.sandbox = sandbox
        self.settings = settings
        self.db = db
        self.started_at = started_at
        self.secrets = secrets

    @method("debug/info")
    async def info(self, params: None, ctx: RequestContext) -> DebugInfo:
        sandbox = await self.sandbox.status()
        return DebugInfo(
            pid=os.getpid(),
            version=__version__,
            python=sys.version.split()[0],
            data_dir=str(self.settings.data_dir),
            uptime_ms=int((time.monotonic() - self.started_at) * 1000),
            rss_bytes=rss_bytes(),
            inflight_requests=ctx.connection.inflight_count,
            heavy_modules_loaded=[m for m in HEAVY_MODULES if m in sys.modules],
            tools_enabled=self.switch.enabled,
            tools_running=self.switch.running,
            db_transactions=self.db.transactions,
            secrets_backend=self.secrets.backend if self.secrets.chosen else None,
            secrets_error=self.secrets.error,
            frozen_objects=gc.get_freeze_count(),
            sandbox=SandboxInfo(mechanism=sandbox.mechanism, confined=sandbox.confined,
                                limits=await self.sandbox.limits(), landlock_abi=sandbox.landlock_abi,
                                warning=sandbox.warning),
            relevance_model=self._relevance(),
            child_environment=ChildEnvironmentInfo(
                tools=inherited.inherited_names(network=True),
                mcp_servers=inherited.inherited_names(network=True, package_runners=True)),
        )

    def _relevance(self) -> RelevanceModelInfo | None:
        if self.relevance is None:
            return None
        s = self.relevance.model.status()
        return RelevanceModelInfo(state=s.state, loaded=s.state == "loaded", path=s.path, tokenizer=s.tokenizer,
                                  model_id=s.model_id, dimension=s.dimension,
                                  fallback_reason=s.reason if s.state == "unavailable" else None,
                                  embedded=self.relevance.embedded)

    @method("debug/sleep")
    async def sleep(self, params: SleepParams, ctx: RequestContext) -> SleepResult:
        if not 0 <= params.ms <= 3_600_000:
            raise InvalidParams("params.ms", "must be between 0 and 3600000")
        token = params.work_done_token
        start = time.monotonic()
        if token is None:
            await anyio.sleep(params.ms / 1000)
        else:
            await ctx.progress(token, {"kind": "begin", "title": "sleeping", "percentage": 0})
            for step in range(1, 11):
                await anyio.sleep(params.ms / 10_000)
                await ctx.progress(token, {"kind": "report", "percentage": step * 10})
            await ctx.progress(token, {"kind": "end"})
        return SleepResult(slept_ms=int((time.monotonic() - start) * 1000))

    @method("debug/raise")
    async def raise_(self, params: RaiseParams, ctx: RequestContext) -> None:
        raise DebugRaised(params.message)

    @method("debug/roundTrip")
    async def round_trip(self, params: RoundTripParams, ctx: RequestContext) -> RoundTripResult:
        if not params.method.startswith("ui/"):
            raise InvalidParams("params.method", "only ui/ methods can be sent to the client")
        return RoundTripResult(result=await ctx.request(params.method, params.params))
