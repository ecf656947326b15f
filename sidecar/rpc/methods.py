"""The method table: name -> handler, with how to decode its params and how to run it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec

if TYPE_CHECKING:
    from .context import RequestContext

Handler = Callable[[Any, "RequestContext"], Awaitable[Any]]
CancelMode = Literal["interrupt", "signal"]


@dataclass(slots=True)
class Method:
    name: str
    handler: Handler
    params_type: Any | None
    notification: bool
    inline: bool
    cancel: CancelMode
    _decoder: msgspec.json.Decoder[Any] | None = field(default=None, repr=False)

    def decode_params(self, raw: bytes) -> Any:
        if self.params_type is None:
            return None
        if self._decoder is None:
            self._decoder = msgspec.json.Decoder[Any](self.params_type)
        return self._decoder.decode(raw)


class MethodTable:
    def __init__(self, on_unknown: Callable[[], None] | None = None) -> None:
        """``on_unknown``: called once, the first time a name the table lacks is looked up, to add
        what it can (a table may start with a few methods and learn the rest when first needed)."""
        self._methods: dict[str, Method] = {}
        self._on_unknown = on_unknown

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        params_type: Any | None = None,
        notification: bool = False,
        inline: bool = False,
        cancel: CancelMode = "interrupt",
    ) -> None:
        """Register ``handler(params, ctx)``.

        ``inline`` runs it in the reader in receive order, with no task of its own: only for
        handlers that never wait. ``cancel="signal"`` makes ``$/cancelRequest`` set
        ``ctx.cancel_requested`` instead of interrupting, for handlers that wind down on their own
        and still return a normal result.
        """
        if name in self._methods:
            raise ValueError(f"method {name!r} registered twice")
        self._methods[name] = Method(name, handler, params_type, notification, inline, cancel)

    def set_handler(self, name: str, handler: Handler) -> None:
        """Serve an already registered method with ``handler`` from now on (how it runs is kept)."""
        self._methods[name].handler = handler

    def get(self, name: str) -> Method | None:
        found = self._methods.get(name)
        if found is None and self._on_unknown is not None:
            complete, self._on_unknown = self._on_unknown, None
            complete()
            found = self._methods.get(name)
        return found

    def names(self) -> list[str]:
        self.get("")  # whatever the table has yet to learn, it learns now
        return sorted(self._methods)
