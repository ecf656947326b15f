"""Signature -> msgspec Struct -> JSON Schema, and validation of call arguments against it.

One ``msgspec.defstruct`` per tool does both jobs, so the schema the model sees and the checks
its arguments pass cannot drift apart. msgspec already handles dataclasses, Structs, TypedDicts,
Enums, Literals and recursion; pydantic models and paths go through hooks.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import msgspec

from ._context import ToolContext
from ._docstrings import parse_docstring

_ARGS = "__covalt_args__"
# pydantic refs are parked under this prefix until their final $defs names are known.
_PYD_REF = "#/$defs/__covalt_pydantic__/"


class ArgumentError(ValueError):
    """``path`` says where in the call (``args.config.items[2].name``); ``reason`` what is wrong."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Analysis:
    qualname: str
    summary: str
    args_type: type[msgspec.Struct]
    injected: dict[str, str]  # parameter -> "workspace" | "context", filled by the runtime
    defaults: dict[str, Any]
    param_docs: dict[str, str]


def analyze(fn: Callable[..., Any]) -> Analysis:
    qualname = getattr(fn, "__qualname__", repr(fn))
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"{qualname}: cannot resolve the type hints of its parameters: {exc}") from exc
    summary, param_docs = parse_docstring(inspect.getdoc(fn))
    fields: list[tuple[Any, ...]] = []
    injected: dict[str, str] = {}
    defaults: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(
                f"{qualname}: tools cannot take *args or **kwargs ({p}); "
                "declare each argument so it can be described to the model"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"{qualname}: parameter {p.name!r} is positional-only; tools are called by keyword")
        hint = hints.get(p.name, Any)
        if p.name == "workspace":
            injected[p.name] = "workspace"
            continue
        if _strip_annotated(hint) is ToolContext:
            injected[p.name] = "context"
            continue
        if p.default is p.empty:
            fields.append((p.name, hint))
        else:
            # UNSET rather than the real default: omitted arguments are left out of the kwargs so
            # Python applies the function's own (possibly mutable) default.
            fields.append((p.name, hint, msgspec.UNSET))
            defaults[p.name] = p.default
    args_type = msgspec.defstruct(_ARGS, fields, kw_only=True, forbid_unknown_fields=True)
    return Analysis(qualname, summary, args_type, injected, defaults, param_docs)


def input_schema_for(fn: Callable[..., Any]) -> dict[str, Any]:
    spec = getattr(fn, "__covalt_tool__", None)
    if spec is not None:
        return spec.input_schema
    return build_schema(analyze(fn))


def output_schema_for(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The JSON Schema of what ``fn`` returns, from its return annotation (a TypedDict, dataclass,
    msgspec Struct, builtins...), as the worker writes such a value; None when it has no annotation,
    says ``Any``, or names something JSON cannot describe (then its results are not checked)."""
    try:
        hint = typing.get_type_hints(fn, include_extras=True).get("return", Any)
    except Exception:  # an annotation that does not resolve: the input side has reported it already
        return None
    if _strip_annotated(hint) is Any:
        return None

    def hook(tp: Any) -> dict[str, Any]:
        if isinstance(tp, type) and issubclass(tp, PurePath):
            return {"type": "string"}
        raise NotImplementedError  # a pydantic model among others: left unchecked

    try:
        return msgspec.json.schema(hint, schema_hook=hook)
    except (TypeError, ValueError, NotImplementedError):
        return None


def build_schema(an: Analysis) -> dict[str, Any]:
    models: list[type] = []

    def hook(tp: Any) -> dict[str, Any]:
        if isinstance(tp, type) and issubclass(tp, PurePath):
            return {"type": "string"}
        if _is_pydantic_model(tp):
            if tp not in models:
                models.append(tp)
            return {"$ref": _PYD_REF + str(models.index(tp))}
        raise NotImplementedError

    try:
        doc = msgspec.json.schema(an.args_type, schema_hook=hook)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{an.qualname}: cannot build an input schema: {exc}") from exc
    defs: dict[str, Any] = doc["$defs"]
    _keep_choice_order(doc, an.args_type)
    if models:
        _merge_pydantic(doc, defs, models)
    root = defs.pop(_ARGS)
    props: dict[str, Any] = root.get("properties", {})
    for name, prop in props.items():
        if name in an.defaults:
            _set_default(prop, an.defaults[name])
        if name in an.param_docs and "description" not in prop:
            prop["description"] = an.param_docs[name]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": props,
        "required": root.get("required", []),
        "additionalProperties": False,
    }
    if defs:
        schema["$defs"] = defs
    return schema


def _keep_choice_order(doc: dict[str, Any], args_type: type[msgspec.Struct]) -> None:
    """msgspec sorts the choices of an Enum or a Literal; the model should see them in the order
    the author wrote them (often most likely first)."""
    orders: list[list[Any]] = []
    by_title: dict[str, list[Any]] = {}
    seen: set[Any] = set()
    for field in msgspec.structs.fields(args_type):
        _collect_choices(field.type, orders, by_title, seen)
    if orders:
        _reorder_enums(doc, orders, by_title)


def _collect_choices(tp: Any, orders: list[list[Any]], by_title: dict[str, list[Any]], seen: set[Any]) -> None:
    tp = _strip_annotated(tp)
    if typing.get_origin(tp) is typing.Literal:
        orders.append([v.value if isinstance(v, enum.Enum) else v for v in typing.get_args(tp)])
        return
    for arg in typing.get_args(tp):
        _collect_choices(arg, orders, by_title, seen)
    if not isinstance(tp, type) or tp in seen:
        return
    seen.add(tp)
    if issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
        orders.append(values)
        by_title[tp.__name__] = values
        return
    if issubclass(tp, msgspec.Struct):
        hints: list[Any] = [f.type for f in msgspec.structs.fields(tp)]
    elif dataclasses.is_dataclass(tp) or typing.is_typeddict(tp) or (issubclass(tp, tuple) and hasattr(tp, "_fields")):
        try:
            hints = list(typing.get_type_hints(tp, include_extras=True).values())
        except Exception:  # unresolvable annotations: msgspec has already reported them
            return
    else:
        return
    for hint in hints:
        _collect_choices(hint, orders, by_title, seen)


def _choice_key(value: Any) -> tuple[str, Any]:
    return type(value).__name__, value  # 1, True and "1" are different choices


def _reorder_enums(node: Any, orders: list[list[Any]], by_title: dict[str, list[Any]]) -> None:
    if isinstance(node, dict):
        choices = node.get("enum")
        if isinstance(choices, list):
            have = {_choice_key(v) for v in choices}
            title = node.get("title")
            candidates = [by_title[title]] if isinstance(title, str) and title in by_title else orders
            for order in candidates:
                keys = {_choice_key(v) for v in order}
                # A None choice becomes a separate {"type": "null"} beside the enum.
                if have <= keys and all(v is None for v in order if _choice_key(v) not in have):
                    node["enum"] = [v for v in order if _choice_key(v) in have]
                    break
        for value in node.values():
            _reorder_enums(value, orders, by_title)
    elif isinstance(node, list):
        for value in node:
            _reorder_enums(value, orders, by_title)


def _merge_pydantic(doc: dict[str, Any], defs: dict[str, Any], models: list[type]) -> None:
    from pydantic.json_schema import models_json_schema

    # One call for all models lets pydantic share and disambiguate its own nested definitions.
    keys, pyd = models_json_schema([(m, "validation") for m in models], ref_template=_PYD_REF + "{model}")
    renames = {_PYD_REF + str(i): keys[(m, "validation")]["$ref"] for i, m in enumerate(models)}
    for name, sub in pyd.get("$defs", {}).items():
        final, n = name, 2
        while final in defs:  # a msgspec type of the same name got there first
            final, n = f"{name}{n}", n + 1
        defs[final] = sub
        renames[_PYD_REF + name] = "#/$defs/" + final
    # The model refs point at pydantic's names, which may themselves have been renamed.
    renames = {k: renames.get(v, v) for k, v in renames.items()}
    _rewrite_refs(doc, renames)


def _rewrite_refs(node: Any, renames: dict[str, str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in renames:
            node["$ref"] = renames[ref]
        for value in node.values():
            _rewrite_refs(value, renames)
    elif isinstance(node, list):
        for value in node:
            _rewrite_refs(value, renames)


def _set_default(prop: dict[str, Any], default: Any) -> None:
    def enc(obj: Any) -> Any:
        if isinstance(obj, PurePath):
            return str(obj)
        if _is_pydantic_model(type(obj)):
            return obj.model_dump(mode="json")
        raise NotImplementedError

    try:
        # Through JSON, not to_builtins: a tuple default must read as a list, as the model sees it.
        prop["default"] = msgspec.json.decode(msgspec.json.encode(default, enc_hook=enc))
    except (TypeError, ValueError, NotImplementedError, OverflowError):
        pass  # A default JSON cannot express is still applied by Python; the schema just omits it.


def convert_args(args_type: type[msgspec.Struct], args: Any) -> dict[str, Any]:
    pydantic_locs: list[tuple[Any, ...]] = []

    def dec_hook(tp: Any, obj: Any) -> Any:
        if isinstance(tp, type) and issubclass(tp, PurePath):
            if isinstance(obj, str):
                return tp(obj)
            raise TypeError(f"Expected `str`, got `{type(obj).__name__}`")
        if _is_pydantic_model(tp):
            if isinstance(obj, tp):
                return obj
            try:
                # JSON-mode strict matches msgspec's strictness: "5" is no int, yet enum values
                # and ISO dates are accepted as JSON spells them (python-mode strict would not).
                return tp.model_validate_json(msgspec.json.encode(obj), strict=True)
            except sys.modules["pydantic"].ValidationError as exc:
                err = exc.errors()[0]
                # msgspec only knows the path down to the model; keep pydantic's part for later.
                pydantic_locs.append(tuple(err["loc"]))
                raise ValueError(err["msg"]) from None
        raise NotImplementedError

    try:
        out = msgspec.convert(args, args_type, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        raise _argument_error(str(exc), pydantic_locs[-1] if pydantic_locs else ()) from None
    kwargs = {}
    for name in args_type.__struct_fields__:
        value = getattr(out, name)
        if value is not msgspec.UNSET:
            kwargs[name] = value
    return kwargs


_FIELD_MSG = re.compile(r"Object (missing required|contains unknown) field `(.*)`")


def _argument_error(message: str, loc: tuple[Any, ...]) -> ArgumentError:
    reason, sep, where = message.rpartition(" - at `")
    if not sep:
        reason, where = message, "$`"
    path = "args" + where[1:-1]
    m = _FIELD_MSG.fullmatch(reason)
    if m:
        what = "argument" if path == "args" else "field"
        path += "." + m[2]
        reason = f"missing required {what}" if m[1].startswith("missing") else f"unknown {what}"
    path += "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    return ArgumentError(path, reason)


def _strip_annotated(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint


def _is_pydantic_model(tp: Any) -> bool:
    # Never import pydantic: if it is not loaded yet, no annotation can be one of its models.
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)
