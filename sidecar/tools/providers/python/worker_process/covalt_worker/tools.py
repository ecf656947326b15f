"""The toolset's tools as the worker holds them: imported once in the zygote, described, and
called in a call's child (arguments checked, context set, result encoded within bounds)."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

import msgspec

from .limits import limit_error, limit_failure
from .messages import describe_exc, format_traceback, inside, size_text
from .protocol import INVALID_PARAMS, CallLimits, CallParams, Config, Failure

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# Levels of lists and objects a result may nest: the sidecar, the database and the UI each walk
# it recursively again, deeper in their own stacks, so the limit leaves them most of theirs.
MAX_DEPTH = 256
_DEPTH_MARGIN = 16  # frames for enc_hook (a pydantic model's model_dump) while encoding


class NotJson(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__(type(value).__name__)
        self.type_name = type(value).__name__


def _enc_hook(value: Any) -> Any:
    if isinstance(value, PurePath):
        return str(value)
    pydantic = sys.modules.get("pydantic")  # a tool returning a model has imported pydantic already
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    raise NotJson(value)


class Toolset:
    def __init__(self, config: Config, sdk: ModuleType) -> None:
        self.config = config
        self.sdk = sdk
        self.encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
        self.functions: dict[str, Callable[..., Any]] = {}
        self.imported = 0  # bumped at each import: a spare forked before it lacks the module
        self.last = ""  # the entrypoint called last: the one a spare rehearses
        # Released when a tool exhausts memory, so the answer can still be built and sent.
        self.reserve: bytearray | None = bytearray(1 << 20)

    def describe(self, entrypoint: str) -> dict[str, Any]:
        fn = self.load(entrypoint)
        spec = self.sdk.get_tool_spec(fn)
        if spec is None:
            doc = inspect.getdoc(fn) or ""
            return {
                "name": fn.__name__,
                "description": doc.split("\n\n", 1)[0].strip(),
                "inputSchema": None,  # the manifest declares it
                "requiresConfirmation": False,
                "timeout": None,
                "legacy": True,
                "outputSchema": self.sdk.output_schema_for(fn),
            }
        return {
            "name": spec.name,
            "description": spec.description,
            "inputSchema": spec.input_schema,
            "requiresConfirmation": spec.requires_confirmation,
            "timeout": spec.timeout,
            "legacy": False,
            "outputSchema": self.sdk.output_schema_for(fn),
        }

    def load(self, entrypoint: str) -> Callable[..., Any]:
        fn = self.functions.get(entrypoint)
        if fn is None:
            fn = self.functions[entrypoint] = self.resolve(entrypoint)
            self.imported += 1
        return fn

    def resolve(self, entrypoint: str) -> Callable[..., Any]:
        module_name, sep, attr = entrypoint.partition(":")
        if not sep or not _DOTTED.fullmatch(module_name) or not attr.isidentifier():
            raise Failure("load", f"bad entrypoint {entrypoint!r}: expected 'module.path:function', "
                                  "e.g. 'tools.files:write_file'")
        file = module_name.replace(".", "/") + ".py"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name + ".").startswith(exc.name + "."):
                raise Failure("load", f"{file}: no such file in the toolset") from None
            raise Failure("load", f"{file}: {describe_exc(exc)}") from None
        except (Exception, SystemExit) as exc:  # any error in the module's top-level code
            raise Failure("load", f"{file}: {describe_exc(exc)}") from None
        if not inside(getattr(module, "__file__", None) or "", self.config.toolset_dir):
            raise Failure("load", f"{file}: {module_name!r} is not a module of this toolset")
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise Failure("load", f"{file}: no function {attr!r}")
        return fn

    # -- calling a tool (in a call's child) --------------------------------------------------------

    def context(self, params: CallParams) -> Any:
        return self.sdk.ToolContext(
            workspace=Path(params.context.workspace),
            chat_id=params.context.chat_id,
            toolset_id=self.config.toolset_id,
            toolset_dir=Path(self.config.toolset_dir),
            tool_call_id=params.context.tool_call_id,
            settings=params.context.settings,
            telemetry=params.context.telemetry,
        )

    def bind(self, fn: Callable[..., Any], params: CallParams, ctx: Any) -> Callable[[], Any]:
        """Check the arguments and return the call to make; the tool has not run yet."""
        spec = self.sdk.get_tool_spec(fn)
        try:
            if spec is None:
                self.sdk.check_legacy_args(params.input_schema, params.args)
                args = params.args
                return lambda: fn(ctx.workspace, **args)
            kwargs = self.sdk.validate_args(spec, params.args) | spec.injected_kwargs(ctx)
        except self.sdk.ArgumentError as exc:
            raise Failure("arguments", exc.reason, INVALID_PARAMS, path=exc.path, reason=exc.reason) from None
        return lambda: fn(**kwargs)

    def run(self, invoke: Callable[[], Any], ctx: Any, limits: CallLimits) -> Any:
        token = self.sdk.set_context(ctx)
        try:
            result = invoke()
            if inspect.iscoroutine(result):
                import asyncio  # only async tools pay for it

                result = asyncio.run(result)
            return result
        except KeyboardInterrupt:
            raise Failure("cancelled", "the call was stopped") from None
        except MemoryError as exc:
            raise self.memory_failure(exc, limits) from None
        except OSError as exc:
            passed = limit_error(exc, limits)
            if passed is not None:
                raise passed from None
            raise self.raised(exc) from None
        except Exception as exc:
            raise self.raised(exc) from None
        finally:
            self.sdk.clear_context(token)

    def raised(self, exc: BaseException) -> Failure:
        name = type(exc).__name__
        return Failure("raised", describe_exc(exc), type=name, traceback=format_traceback(exc, self.config.toolset_dir))

    def memory_failure(self, exc: MemoryError, limits: CallLimits) -> Failure:
        self.reserve = None
        # The frames' locals are what filled the memory; the traceback would keep them alive.
        traceback.clear_frames(exc.__traceback__)
        return limit_failure("memory", limits.memory_bytes, "MemoryError: the tool needed more memory than",
                              type="MemoryError", traceback=format_traceback(exc, self.config.toolset_dir))

    def encode_result(self, result: Any) -> bytes:
        # The encoder enforces the depth: on CPython 3.11 msgspec counts each level it enters against
        # the recursion limit, so a limit of (frames above us + MAX_DEPTH + a margin for enc_hook's
        # frames) stops it near MAX_DEPTH, with no walk of the result in Python before encoding.
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(_frame_depth() + MAX_DEPTH + _DEPTH_MARGIN)
        try:
            data = self.encoder.encode(result)
        except RecursionError:
            raise Failure("output", f"the tool's result is nested more than {MAX_DEPTH} levels deep: "
                                    "return a flatter structure") from None
        except NotJson as exc:
            raise Failure(
                "output",
                f"the tool returned {exc.type_name}, which is not JSON: "
                "return dicts, lists, str, int, float, bool or None",
            ) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise Failure("output", f"the tool's result cannot be written as JSON: {exc}") from None
        finally:
            sys.setrecursionlimit(limit)
        if len(data) > self.config.output_bytes:
            raise Failure(
                "output",
                f"the tool's result is {size_text(len(data))} of JSON, over the limit of "
                f"{size_text(self.config.output_bytes)}: return less, or write it to a file in the workspace",
            )
        return data

    def error(self, failure: Failure) -> bytes:
        return self.encoder.encode({"error": {"code": failure.code, "message": failure.message, "data": failure.data}})


def _frame_depth() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth
