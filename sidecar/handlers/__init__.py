"""Thin adapters from wire params to services, one module per api module.

The method table is built before any service exists, so ``initialize`` is answered at once; every
method but the lifecycle ones waits for ``Deferred.bind``, which ``app`` calls once ``compose`` has
built the services (right after the ``initialize`` answer is on its way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from ..api import SPECS
from ..errors import SidecarError, StorageError
from ..rpc import MethodTable, RequestContext
from .lifecycle import Lifecycle, LifecycleHandlers
from .routes import routes, served_by

ENGINE_METHODS = {"$/cancelRequest"}  # answered by the engine itself
CLIENT_METHODS = frozenset(s.name for s in SPECS if s.direction != "serverToClient") - ENGINE_METHODS
LIFECYCLE_METHODS = frozenset(served_by(LifecycleHandlers))

Handler = Callable[[Any, RequestContext], Any]


class Deferred:
    """The handlers of every method that needs the services, bound once the services exist."""

    def __init__(self) -> None:
        self._bound: dict[str, Handler] = {}
        self._ready = anyio.Event()
        self._failure: SidecarError | None = None

    def bind(self, handlers: dict[str, Handler]) -> None:
        missing = sorted(CLIENT_METHODS - LIFECYCLE_METHODS - handlers.keys())
        if missing:
            raise RuntimeError(f"the contract names {missing} but no handler serves them")
        extra = sorted(handlers.keys() - CLIENT_METHODS)
        if extra:
            raise RuntimeError(f"handlers without a spec in sidecar/api: {extra}")
        self._bound = handlers
        self._ready.set()

    def fail(self, reason: str) -> None:
        """The services could not be built: every waiting and later request is told why."""
        self._failure = StorageError(reason)
        self._ready.set()

    def handler(self, name: str) -> Handler:
        async def call(params: Any, ctx: RequestContext) -> Any:
            handler = self._bound.get(name)
            if handler is None:
                await self._ready.wait()
                if self._failure is not None:
                    raise self._failure
                handler = self._bound[name]
            return await handler(params, ctx)

        return call


def method_table(app: Lifecycle, deferred: Deferred) -> MethodTable:
    """Every client-to-server method of the contract, with how the spec says to run it."""
    now = routes(LifecycleHandlers(app))
    table = MethodTable()
    for name in sorted(CLIENT_METHODS):
        s = next(s for s in SPECS if s.name == name)
        table.add(name, now.get(name) or deferred.handler(name), params_type=s.params,
                  notification=s.kind == "notification", inline=s.inline, cancel=s.cancel)
    return table
