"""Thin adapters from wire params to services, one module per api module.

The method table is built before any service exists, so ``initialize`` is answered at once; every
method but the lifecycle ones waits for ``Deferred.bind``, which ``app`` calls once ``compose`` has
built the services (right after the ``initialize`` answer is on its way).
"""

from __future__ import annotations

from typing import Any

import anyio

from ..errors import SidecarError
from ..rpc import MethodTable, RequestContext
from ..rpc.methods import Handler
from .lifecycle import Lifecycle, LifecycleHandlers
from .routes import CLIENT_METHODS, SPEC_BY_NAME, routes, served_by

LIFECYCLE_METHODS = frozenset(served_by(LifecycleHandlers))


class Deferred:
    """The method table of every client-to-server method, served from the first byte.

    The lifecycle methods have their handlers at once. Every other method is served, until
    ``bind``, by a stand-in that waits for the services; ``bind`` then puts the real handlers in the
    table, so once the services exist a request goes straight to its handler.
    """

    def __init__(self, app: Lifecycle) -> None:
        self._bound: dict[str, Handler] = {}
        self._ready = anyio.Event()
        self._failure: SidecarError | None = None
        self.table = MethodTable()
        now = routes(LifecycleHandlers(app))
        for name in sorted(CLIENT_METHODS):
            s = SPEC_BY_NAME[name]
            self.table.add(name, now.get(name) or self._waiting(name), params_type=s.params,
                           notification=s.kind == "notification", inline=s.inline, cancel=s.cancel)

    def bind(self, handlers: dict[str, Handler]) -> None:
        missing = sorted(CLIENT_METHODS - LIFECYCLE_METHODS - handlers.keys())
        if missing:
            raise RuntimeError(f"the contract names {missing} but no handler serves them")
        extra = sorted(handlers.keys() - CLIENT_METHODS)
        if extra:
            raise RuntimeError(f"handlers without a spec in sidecar/api: {extra}")
        for name, handler in handlers.items():
            self.table.set_handler(name, handler)
        self._bound = handlers
        self._ready.set()

    def fail(self, failure: SidecarError) -> None:
        """The services could not be built: every waiting and later request is told why."""
        self._failure = failure
        self._ready.set()

    def _waiting(self, name: str) -> Handler:
        async def call(params: Any, ctx: RequestContext) -> Any:
            await self._ready.wait()
            if self._failure is not None:
                raise self._failure
            return await self._bound[name](params, ctx)

        return call
