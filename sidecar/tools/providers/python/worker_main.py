"""The worker process that runs one toolset's Python tools, one call at a time.

Started by ``sidecar/tools/providers/python/workers.py`` as ``python -I worker_main.py <config>``: a script, not a
module of the ``sidecar`` package, so it starts on the standard library, msgspec and the tool SDK
alone. It is one file on purpose: ``-I`` keeps its own folder off ``sys.path``, so it has no siblings
to import. ``<config>`` is one JSON object (nothing secret: it shows up in ``ps``)::

    {"toolsetId": "app-builder", "toolsetDir": "/abs/toolset", "sdkDir": "/abs/sidecar/tools/providers/python/sdk",
     "memoryBytes": 1073741824, "fileBytes": 1073741824, "maxProcesses": 64,
     "outputBytes": 16777216, "idleSeconds": 300, "parentPid": 4242}

It speaks NDJSON JSON-RPC 2.0 on stdin/stdout. Methods:

- ``describe {tools: {toolId: entrypoint}}`` -> ``{toolId: {"ok": {name, description, inputSchema,
  requiresConfirmation, timeout, legacy}} | {"error": "tools/x.py: what is wrong"}}``
- ``call {tool, entrypoint, args, inputSchema, context: {workspace, chatId, toolCallId, settings,
  telemetry}}`` -> ``{"result": value}``, plus ``"lingering": true`` (in ``data`` of an error) when
  the tool left threads running: they may still write relative to the current folder, which the
  next call changes to its own workspace, so the host gives this worker no call of another chat.
  The toolset id and folder in the tool's context come from the config. ``settings`` holds the
  tool's configuration, secret values included: it arrives on stdin with each call, never in the
  environment or on the command line, and the worker never writes it anywhere.
- ``shutdown`` -> ``{}``, then the worker exits.

A failed call is a JSON-RPC error whose ``data.kind`` says how it failed: ``arguments`` (-32602,
with ``path`` and ``reason``), ``raised`` (with ``type`` and ``traceback``), ``memory`` (the worker
exits after answering), ``load``, ``output`` or ``cancelled`` (SIGINT from the host), all -32000.
A request the worker cannot read is -32700, -32601 or -32602 with ``data.kind`` ``protocol``.

The worker exits 0 at stdin EOF, after ``shutdown``, or after ``idleSeconds`` without a request;
on the way out it sends SIGTERM to what the tools left running in its process group.
POSIX only (resource limits, process groups, select on a pipe).
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import importlib
import inspect
import os
import re
import resource
import select
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

import msgspec

PARSE_ERROR = -32700
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
TOOL_ERROR = -32000

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_MAX_MESSAGE = 4_000  # characters of an exception message sent back
_MAX_TRACEBACK = 32_000  # characters, the end kept: the innermost frames matter most
# Levels of lists and objects a result may nest: the sidecar, the database and the UI each walk
# it recursively again, deeper in their own stacks, so the limit leaves them most of theirs.
MAX_DEPTH = 256
_DEPTH_MARGIN = 16  # frames for enc_hook (a pydantic model's model_dump) while encoding


class Config(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    toolset_id: str
    toolset_dir: str
    sdk_dir: str
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 30
    max_processes: int = 64
    output_bytes: int = 16 << 20
    idle_seconds: float = 300.0
    parent_pid: int | None = None  # the sidecar, when the worker must arm its parent-death signal itself


class Request(msgspec.Struct):
    method: str
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"{}")


class DescribeParams(msgspec.Struct):
    tools: dict[str, str]


class CallContext(msgspec.Struct, rename="camel"):
    workspace: str
    chat_id: str | None = None
    tool_call_id: str | None = None
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    telemetry: dict[str, Any] = msgspec.field(default_factory=dict)


class CallParams(msgspec.Struct, rename="camel"):
    tool: str
    entrypoint: str
    context: CallContext
    args: Any = msgspec.field(default_factory=dict)
    input_schema: dict[str, Any] | None = None


class Failure(Exception):
    """A call that failed; becomes the JSON-RPC error of its request."""

    def __init__(self, kind: str, message: str, code: int = TOOL_ERROR, fatal: bool = False, **data: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = {"kind": kind, **data}
        self.fatal = fatal  # the worker must exit once it has answered


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


class Worker:
    def __init__(self, config: Config, wire_out: int, sdk: ModuleType) -> None:
        self.config = config
        self.home = config.toolset_dir
        self.sdk = sdk
        self.wire_out = wire_out
        self.encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
        self.functions: dict[str, Callable[..., Any]] = {}
        self.stopping = False
        # Released when a tool exhausts memory, so the answer can still be built and sent.
        self.reserve: bytearray | None = bytearray(1 << 20)
        self.methods: dict[str, Callable[[msgspec.Raw], Any]] = {
            "describe": self.describe,
            "call": self.call,
            "shutdown": self.shutdown,
        }

    def serve(self, wire_in: int) -> None:
        for line in _lines(wire_in, self.config.idle_seconds):
            self.handle(line)
            if self.stopping:
                return

    def handle(self, line: bytes) -> None:
        try:
            request = msgspec.json.decode(line, type=Request)
        except msgspec.DecodeError as exc:
            self.send_error(None, Failure("protocol", f"not a JSON-RPC request: {exc}", PARSE_ERROR))
            return
        method = self.methods.get(request.method)
        if method is None:
            self.send_error(request.id, Failure("protocol", f"unknown method {request.method!r}", METHOD_NOT_FOUND))
            return
        try:
            result = method(request.params)
        except Failure as failure:
            self.send_error(request.id, failure)
            if failure.fatal:
                _exit(1)
            return
        self.send({"jsonrpc": "2.0", "id": request.id, "result": result})

    # -- methods ---------------------------------------------------------------------------------

    def describe(self, raw: msgspec.Raw) -> dict[str, Any]:
        params = _params(raw, DescribeParams)
        out: dict[str, Any] = {}
        for tool_id, entrypoint in params.tools.items():
            try:
                out[tool_id] = {"ok": self.describe_one(entrypoint)}
            except Failure as failure:
                out[tool_id] = {"error": failure.message}
        return out

    def describe_one(self, entrypoint: str) -> dict[str, Any]:
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

    def call(self, raw: msgspec.Raw) -> dict[str, Any]:
        params = _params(raw, CallParams)
        fn = self.load(params.entrypoint)
        ctx = self.sdk.ToolContext(
            workspace=Path(params.context.workspace),
            chat_id=params.context.chat_id,
            toolset_id=self.config.toolset_id,
            toolset_dir=Path(self.config.toolset_dir),
            tool_call_id=params.context.tool_call_id,
            settings=params.context.settings,
            telemetry=params.context.telemetry,
        )
        invoke = self.bind(fn, params, ctx)
        try:
            os.chdir(ctx.workspace)
        except OSError as exc:
            raise Failure("load", f"cannot enter the workspace {ctx.workspace}: {exc.strerror}") from None
        try:
            result = self.run(invoke, ctx)
        except Failure as failure:
            if _threads_left():
                failure.data["lingering"] = True
            raise
        finally:
            os.chdir(self.home)
        answer: dict[str, Any] = {"result": msgspec.Raw(self.encode_result(result))}
        if _threads_left():
            answer["lingering"] = True
        return answer

    def shutdown(self, raw: msgspec.Raw) -> dict[str, Any]:
        self.stopping = True
        return {}

    # -- calling a tool --------------------------------------------------------------------------

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

    def run(self, invoke: Callable[[], Any], ctx: Any) -> Any:
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
            raise self.memory_failure(exc) from None
        except Exception as exc:
            name = type(exc).__name__
            raise Failure(
                "raised", _describe(exc), type=name, traceback=_format_traceback(exc, self.config.toolset_dir)
            ) from None
        finally:
            self.sdk.clear_context(token)

    def memory_failure(self, exc: MemoryError) -> Failure:
        self.reserve = None
        # The frames' locals are what filled the memory; the traceback would keep them alive.
        traceback.clear_frames(exc.__traceback__)
        limit = _size(self.config.memory_bytes)
        return Failure(
            "memory",
            f"MemoryError: the tool needed more memory than the worker's limit of {limit}",
            fatal=True,  # allocations failed mid-way: the heap may be inconsistent
            type="MemoryError",
            traceback=_format_traceback(exc, self.config.toolset_dir),
        )

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
                f"the tool's result is {_size(len(data))} of JSON, over the limit of "
                f"{_size(self.config.output_bytes)}: return less, or write it to a file in the workspace",
            )
        return data

    # -- loading tools ---------------------------------------------------------------------------

    def load(self, entrypoint: str) -> Callable[..., Any]:
        fn = self.functions.get(entrypoint)
        if fn is None:
            fn = self.functions[entrypoint] = self.resolve(entrypoint)
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
            raise Failure("load", f"{file}: {_describe(exc)}") from None
        except (Exception, SystemExit) as exc:  # any error in the module's top-level code
            raise Failure("load", f"{file}: {_describe(exc)}") from None
        if not _inside(getattr(module, "__file__", None) or "", self.config.toolset_dir):
            raise Failure("load", f"{file}: {module_name!r} is not a module of this toolset")
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise Failure("load", f"{file}: no function {attr!r}")
        return fn

    # -- output ----------------------------------------------------------------------------------

    def send_error(self, request_id: Any, failure: Failure) -> None:
        error = {"code": failure.code, "message": failure.message, "data": failure.data}
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(self.encoder.encode(message) + b"\n")
        while data:
            data = data[os.write(self.wire_out, data):]


# -- helpers ---------------------------------------------------------------------------------------


def _params(raw: msgspec.Raw, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as exc:
        raise Failure("protocol", f"invalid params: {exc}", INVALID_PARAMS) from None


def _lines(fd: int, idle_seconds: float) -> Iterator[bytes]:
    """Request lines from ``fd`` until EOF, or until no request came for ``idle_seconds``."""
    buf = bytearray()
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            if line.strip():
                yield line
            continue
        if not select.select([fd], [], [], idle_seconds)[0]:
            return
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return
        buf += chunk


def _frame_depth() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    text = text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _format_traceback(exc: BaseException, toolset_dir: str) -> str:
    """The frames in the toolset's own files if there are any, else all but the worker's."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    own = [f for f in frames if _inside(f.filename, toolset_dir)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(own or frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    text = "".join(lines)
    return text if len(text) <= _MAX_TRACEBACK else "…" + text[-_MAX_TRACEBACK:]


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


# -- process set-up --------------------------------------------------------------------------------


def _claim_stdio() -> tuple[int, int]:
    """Private copies of fd 0 and 1 carry the protocol; fd 1 then points at stderr and fd 0 at
    /dev/null, so ``print``, ``os.write(1, ...)``, ``input()`` and child processes can neither
    corrupt nor consume it. ``os.dup`` makes the copies non-inheritable."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    if sys.platform == "linux":
        # 1 MiB instead of 64 KiB: a big result then reaches the sidecar in 16 times fewer turns of
        # its event loop. Best effort: over the user's pipe quota the pipe keeps what it has.
        with contextlib.suppress(OSError):
            fcntl.fcntl(wire_out, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    return wire_in, wire_out


def _apply_limits(config: Config) -> None:
    # An oversized write then fails with OSError (EFBIG) in the tool instead of killing us.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _limit("RLIMIT_AS", config.memory_bytes)
    _limit("RLIMIT_FSIZE", config.file_bytes)
    tasks = _user_tasks()
    if tasks is not None:
        # RLIMIT_NPROC caps all of the user's processes, not ours: leave room for what runs now.
        _limit("RLIMIT_NPROC", tasks + config.max_processes)


def _limit(name: str, value: int) -> None:
    which = getattr(resource, name)
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        # The hard limit too, so neither a tool nor its children can raise it again.
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError) as exc:
        print(f"covalt worker: cannot set {name} to {value}: {exc}", file=sys.stderr)


def _user_tasks() -> int | None:
    """Threads the user runs now (what RLIMIT_NPROC counts on Linux); None without /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    uid, total = os.getuid(), 0
    for name in entries:
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    total += len(os.listdir(f"/proc/{name}/task"))
            except OSError:
                continue  # it exited meanwhile
    return total


def _threads_left() -> bool:
    """Whether a tool left a thread running (only a tool that imported threading can have)."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


def _exit(code: int) -> None:
    """Leave without waiting for threads a tool started, after stopping what it left running:
    the host may be gone, and then nobody else would."""
    if os.getpgrp() == os.getpid():  # never signal a group we were merely started in
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.killpg(0, signal.SIGTERM)
    sys.stderr.flush()
    os._exit(code)


def _die_with_parent(parent_pid: int | None) -> None:
    """On Linux, be killed when the sidecar dies, even by SIGKILL: the host normally arranges it
    before exec (setpriv), this covers hosts without setpriv. Elsewhere stdin EOF tells us."""
    if not sys.platform.startswith("linux") or parent_pid is None:
        return
    import ctypes  # a few ms at every cold start: only where the host could not arm the signal

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the sidecar died before the signal was armed
        os._exit(1)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} <config JSON>")
    config = msgspec.json.decode(argv[1], type=Config)
    _die_with_parent(config.parent_pid)
    config.toolset_dir = os.path.abspath(config.toolset_dir)
    wire_in, wire_out = _claim_stdio()
    faulthandler.enable(sys.stderr)  # a segfault in native code leaves a traceback in stderr
    _apply_limits(config)
    # The toolset folder is managed content: no __pycache__ may appear in it.
    sys.dont_write_bytecode = True
    sys.path[:0] = [config.sdk_dir, config.toolset_dir]
    sdk = importlib.import_module("covalt_toolset")
    os.chdir(config.toolset_dir)
    Worker(config, wire_out, sdk).serve(wire_in)
    _exit(0)


if __name__ == "__main__":
    main(sys.argv)
