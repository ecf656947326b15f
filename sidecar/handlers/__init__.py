"""Thin adapters from wire params to services, one module per api module.

The method table is built before any service exists, so ``initialize`` is answered at once; every
method but the lifecycle ones waits for ``Deferred.bind``, which ``app`` calls once ``compose`` has
built the services (right after the ``initialize`` answer is on its way). The table starts with the
lifecycle methods alone: the specs of the others (every API model, about 13 ms to build) are read
when the first of them arrives or at ``bind``, whichever comes first, both after that answer.
"""

from __future__ import annotations

from typing import Any

import anyio

from ..api import lifecycle as lifecycle_api
from ..api.base import MethodSpec
from ..errors import SidecarError
from ..rpc import MethodTable, RequestContext
from ..rpc.methods import Handler
from .lifecycle import Lifecycle, LifecycleHandlers
from .routes import client_methods, routes, served_by

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
        self.table = MethodTable(on_unknown=self._add_the_rest)
        self._client_methods: dict[str, MethodSpec] | None = None
        lifecycle = client_methods(lifecycle_api.SPECS)
        unknown = sorted(LIFECYCLE_METHODS - lifecycle.keys())
        if unknown:
            raise RuntimeError(f"sidecar/api/lifecycle.py has no client-to-server method {unknown}")
        for name, handler in routes(LifecycleHandlers(app)).items():
            self._add(lifecycle[name], handler)

    def _add(self, s: MethodSpec, handler: Handler) -> None:
        self.table.add(s.name, handler, params_type=s.params, notification=s.kind == "notification",
                       inline=s.inline, cancel=s.cancel)

    def _add_the_rest(self) -> None:
        """Every other method of the contract, waiting for ``bind`` (once; the table asks when a
        name it does not have arrives)."""
        if self._client_methods is not None:
            return
        from ..api.specs import SPECS  # every API model: after the first answer, never before

        self._client_methods = client_methods(SPECS)
        for name, s in sorted(self._client_methods.items()):
            if name not in LIFECYCLE_METHODS:
                self._add(s, self._waiting(name))

    def bind(self, handlers: dict[str, Handler]) -> None:
        self._add_the_rest()
        assert self._client_methods is not None
        served = self._client_methods.keys()
        missing = sorted(served - LIFECYCLE_METHODS - handlers.keys())
        if missing:
            raise RuntimeError(f"the contract names {missing} but no handler serves them")
        extra = sorted(handlers.keys() - served)
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
