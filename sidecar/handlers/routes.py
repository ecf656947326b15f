"""Each handler names its method once, with ``@method``; the contract supplies how to run it.

A handler is a method of a small per-area class whose constructor takes the services it needs.
``routes(obj)`` reads the marked methods of such an object into ``{name: bound handler}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..api.base import MethodSpec

F = TypeVar("F", bound=Callable[..., Any])

ENGINE_METHODS = frozenset({"$/cancelRequest"})  # answered by the engine itself
_MARK = "__rpc_method__"


def client_methods(specs: Iterable[MethodSpec]) -> dict[str, MethodSpec]:
    """What a handler may serve: every client-to-server method but the engine's own, by name."""
    return {s.name: s for s in specs if s.direction != "serverToClient" and s.name not in ENGINE_METHODS}


def method(name: str) -> Callable[[F], F]:
    """Serve the client-to-server method ``name`` (the method table checks it has a spec)."""

    def mark(fn: F) -> F:
        setattr(fn, _MARK, name)
        return fn

    return mark


def served_by(cls: type) -> dict[str, str]:
    """``{method name: attribute name}`` of the handlers a class declares."""
    found: dict[str, str] = {}
    for attr in dir(cls):
        name = getattr(getattr(cls, attr), _MARK, None)
        if name is None:
            continue
        if name in found:
            raise RuntimeError(f"{cls.__name__} serves {name!r} twice")
        found[name] = attr
    return found


def routes(obj: object) -> dict[str, Callable[..., Any]]:
    """``{method name: bound handler}`` of a handler object."""
    return {name: getattr(obj, attr) for name, attr in served_by(type(obj)).items()}
