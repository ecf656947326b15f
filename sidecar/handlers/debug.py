from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio

from .. import __version__
from ..api.debug import (
    DebugInfo,
    RaiseParams,
    RoundTripParams,
    RoundTripResult,
    SleepParams,
    SleepResult,
)
from ..api.errors import InvalidParams
from ..process import rss_bytes
from ..rpc import RequestContext

if TYPE_CHECKING:
    from ..app import Sidecar

HEAVY_MODULES = ("mcp", "pydantic", "openai", "anthropic", "watchfiles", "httpx", "yaml")


class DebugRaised(RuntimeError):
    pass


def handlers(app: Sidecar) -> dict[str, Any]:
    async def info(params: None, ctx: RequestContext) -> DebugInfo:
        return DebugInfo(
            pid=os.getpid(),
            version=__version__,
            python=sys.version.split()[0],
            data_dir=str(app.settings.data_dir),
            uptime_ms=int((time.monotonic() - app.started_at) * 1000),
            rss_bytes=rss_bytes(),
            inflight_requests=ctx.connection.inflight_count,
            heavy_modules_loaded=[m for m in HEAVY_MODULES if m in sys.modules],
            db_transactions=app.db.transactions if app.db is not None else 0,
        )

    async def sleep(params: SleepParams, ctx: RequestContext) -> SleepResult:
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

    async def raise_(params: RaiseParams, ctx: RequestContext) -> None:
        raise DebugRaised(params.message)

    async def round_trip(params: RoundTripParams, ctx: RequestContext) -> RoundTripResult:
        if not params.method.startswith("ui/"):
            raise InvalidParams("params.method", "only ui/ methods can be sent to the client")
        return RoundTripResult(result=await ctx.request(params.method, params.params))

    return {"debug/info": info, "debug/sleep": sleep, "debug/raise": raise_,
            "debug/roundTrip": round_trip}
