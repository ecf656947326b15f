"""``@tool``: records a ToolSpec on the function and hands the function back unchanged."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import msgspec

from ._context import ToolContext
from ._schema import analyze, build_schema, convert_args

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    is_async: bool
    requires_confirmation: bool = False
    timeout: float | None = None
    # parameter -> "workspace" | "context": not in the schema, supplied by the runtime.
    injected: dict[str, str] = field(default_factory=dict)
    args_type: type[msgspec.Struct] | None = field(default=None, repr=False, compare=False)

    def injected_kwargs(self, ctx: ToolContext) -> dict[str, Any]:
        return {n: ctx.workspace if kind == "workspace" else ctx for n, kind in self.injected.items()}


@overload
def tool(fn: F) -> F: ...
@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_confirmation: bool = False,
    timeout: float | None = None,
) -> Callable[[F], F]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_confirmation: bool = False,
    timeout: float | None = None,
) -> Any:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"@tool timeout must be a positive number of seconds, got {timeout!r}")

    def decorate(f: F) -> F:
        setattr(f, "__covalt_tool__", _build_spec(f, name, description, requires_confirmation, timeout))  # noqa: B010 (a marker on any callable; attribute typing can't name it)
        return f

    return decorate if fn is None else decorate(fn)


def get_tool_spec(fn: Any) -> ToolSpec | None:
    spec = getattr(fn, "__covalt_tool__", None)
    return spec if isinstance(spec, ToolSpec) else None


def validate_args(fn_or_spec: Callable[..., Any] | ToolSpec, args: Any) -> dict[str, Any]:
    if isinstance(fn_or_spec, ToolSpec):
        spec = fn_or_spec
    else:
        spec = get_tool_spec(fn_or_spec) or _build_spec(fn_or_spec, None, None, False, None)
    assert spec.args_type is not None
    return convert_args(spec.args_type, args)


def _build_spec(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    requires_confirmation: bool,
    timeout: float | None,
) -> ToolSpec:
    if not callable(fn):
        raise TypeError(f"@tool expects a function, got {type(fn).__name__}")
    an = analyze(fn)
    return ToolSpec(
        name=name or fn.__name__,
        description=an.summary if description is None else description,
        input_schema=build_schema(an),
        fn=fn,
        is_async=inspect.iscoroutinefunction(fn),
        requires_confirmation=requires_confirmation,
        timeout=timeout,
        injected=an.injected,
        args_type=an.args_type,
    )
