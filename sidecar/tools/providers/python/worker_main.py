"""The worker process that runs one toolset's Python tools, one call at a time.

Started by ``sidecar/tools/providers/python/workers.py`` as ``python -I worker_main.py <config>``: a script, not a
module of the ``sidecar`` package, so it starts on the standard library, msgspec and the tool SDK
alone. It is one file on purpose: ``-I`` keeps its own folder off ``sys.path``, so it has no siblings
to import. ``<config>`` is one JSON object (nothing secret: it shows up in ``ps``)::

    {"toolsetId": "app-builder", "toolsetDir": "/abs/toolset", "sdkDir": "/abs/sidecar/tools/providers/python/sdk",
     "memoryBytes": 1073741824, "fileBytes": 1073741824, "maxProcesses": 64,
     "outputBytes": 16777216, "idleSeconds": 300, "parentPid": 4242,
     "cgroup": {"version": 1, "dirs": {"pids": "/sys/fs/cgroup/pids/covalt/4242.1", "memory": "..."}}}

It speaks NDJSON JSON-RPC 2.0 on stdin/stdout. Methods:

- ``describe {tools: {toolId: entrypoint}}`` -> ``{toolId: {"ok": {name, description, inputSchema,
  requiresConfirmation, timeout, legacy}} | {"error": "tools/x.py: what is wrong"}}``
- ``call {tool, entrypoint, args, inputSchema, context: {workspace, chatId, toolCallId, settings,
  telemetry}, limits: {memoryBytes, maxProcesses, diskBytes}}`` -> ``{"result": value}``.
  The toolset id and folder in the tool's context come from the config. ``settings`` holds the
  tool's configuration, secret values included: it arrives on stdin with each call, never in the
  environment or on the command line, and the worker never writes it anywhere.
- ``shutdown`` -> ``{}``, then the worker exits.

A zygote: this process imports the toolset's modules (so calls start warm) but never runs a tool
function. Each call runs in a child forked from it ahead of time (the *spare*: forked after the
previous answer, so the fork is off the call's path and the child never holds the request's id).
The child's only way back is its own result pipe; the protocol pipes are closed in it, and this
process is not dumpable, so the child cannot reopen them through ``/proc/<worker>/fd``. This
process is a child subreaper: whatever the tool starts, daemons that ``setsid`` and fork twice
included, stays its descendant, and when the call ends (answer, error, limit, cancel) every
descendant is stopped, killed and reaped before the answer goes out. So nothing of a call outlives
it, and a call that is killed costs only its child, not the warm worker.

Per-call limits, in the child and what it starts: memory (RLIMIT_DATA, and the worker's cgroup when
the host made one), processes (the cgroup's ``pids.max``, else RLIMIT_NPROC), and disk: no file
larger than the quota (RLIMIT_FSIZE), and the workspace's file system may not grow by more than the
quota during the call (checked every ``_POLL`` seconds; the files the call wrote past it are kept,
listed in the error: they may be rewrites of the user's own files).

A failed call is a JSON-RPC error whose ``data.kind`` says how it failed: ``arguments`` (-32602,
with ``path`` and ``reason``), ``raised`` (with ``type`` and ``traceback``), ``limit`` (with
``limit``: ``memory``, ``processes`` or ``disk``, and ``value``), ``crashed`` (the call's process
died), ``load``, ``output`` or ``cancelled`` (SIGINT from the host), all -32000.
A request the worker cannot read is -32700, -32601 or -32602 with ``data.kind`` ``protocol``.

The worker exits 0 at stdin EOF, after ``shutdown``, or after ``idleSeconds`` without a request,
after killing its descendants. Linux for the zygote's safety (prctl, /proc); other POSIX systems
get the same fork-per-call without the subreaper and the dumpable flag.
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import fcntl
import gc
import importlib
import inspect
import os
import re
import resource
import select
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

import msgspec

if sys.platform.startswith("linux"):
    import ctypes  # about 2 ms of the cold start: prctl for the subreaper, dumpable and death signal

    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
else:
    _LIBC = None

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
_NICE = 10  # added to a call's processes' niceness (CPU weight 110 against the sidecar's 1024)
_POLL = 0.025  # seconds between checks of a running call's disk use and process count
CHILD_GRACE = 0.5  # seconds a call's child gets to unwind after SIGINT before it is killed
_KILL_ROUNDS = 200  # tree walks while stopping a call's processes (a fork bomb keeps adding)
_KINDS = frozenset({"arguments", "raised", "limit", "load", "output", "cancelled", "crashed", "protocol"})
_REHEARSAL = (b'{"tool":"t","entrypoint":"m:f","args":{"a":"b","n":1},"inputSchema":null,'
              b'"context":{"workspace":"/","chatId":"c","toolCallId":"t","settings":{},"telemetry":{}},'
              b'"limits":{"memoryBytes":1,"maxProcesses":1,"diskBytes":1}}')
_TRAILER = struct.Struct("<Q")  # the length of a call's answer, after it on the result pipe
_SETTINGS = {"memory": "sandbox.memory", "processes": "sandbox.processes", "disk": "sandbox.disk"}


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
    cgroup: CgroupConfig | None = None  # made by the host for this worker's calls (sandbox/cgroups.py)


class CgroupConfig(msgspec.Struct):
    version: int  # 1: one folder per controller ("pids", "memory"); 2: one folder ("unified")
    dirs: dict[str, str]
    fixed: bool = False  # the host set the limits (in a sandbox only cgroup.procs is writable)


class CallLimits(msgspec.Struct, rename="camel"):
    memory_bytes: int = 256 << 20
    max_processes: int = 64
    disk_bytes: int = 1 << 30


class CallHead(msgspec.Struct, rename="camel"):
    """What the zygote reads of a call: the child decodes the rest."""

    entrypoint: str
    context: CallContextHead
    limits: CallLimits = msgspec.field(default_factory=CallLimits)


class CallContextHead(msgspec.Struct):
    workspace: str


class ChildAnswer(msgspec.Struct, forbid_unknown_fields=True):
    result: msgspec.Raw = msgspec.Raw(b"")  # empty when absent (msgspec takes no Raw | None)
    error: ChildError | None = None


class ChildError(msgspec.Struct, forbid_unknown_fields=True):
    code: int
    message: str
    data: dict[str, Any]


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
    limits: CallLimits = msgspec.field(default_factory=CallLimits)


class Failure(Exception):
    """A call that failed; becomes the JSON-RPC error of its request."""

    def __init__(self, kind: str, message: str, code: int = TOOL_ERROR, **data: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = {"kind": kind, **data}


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
    def __init__(self, config: Config, wire_in: int, wire_out: int, sdk: ModuleType) -> None:
        self.config = config
        self.home = config.toolset_dir
        self.sdk = sdk
        self.wire_in = wire_in
        self.wire_out = wire_out
        self.encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
        self.functions: dict[str, Callable[..., Any]] = {}
        self.imported = 0  # bumped at each import: a spare forked before it lacks the module
        self.stopping = False
        self.spare: Spare | None = None
        self.running: Spare | None = None  # the call's child while a call runs
        self.interrupted = False  # SIGINT came during the call
        self.warned_threads = False
        self.cgroup = Cgroup(config.cgroup) if config.cgroup is not None else None
        # Released when a tool exhausts memory, so the answer can still be built and sent.
        self.reserve: bytearray | None = bytearray(1 << 20)
        self.methods: dict[str, Callable[[msgspec.Raw], Any]] = {
            "describe": self.describe,
            "call": self.call,
            "shutdown": self.shutdown,
        }
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def serve(self) -> None:
        # A Python-level handler for each, so their arrival writes a byte to wake_w (select wakes).
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, _ignore)
        signal.signal(signal.SIGINT, self.on_sigint)
        for line in _lines(self.wire_in, self.config.idle_seconds, self.prepare):
            self.handle(line)
            if self.stopping:
                return

    def on_sigint(self, signum: int, frame: Any) -> None:
        if self.running is not None:
            self.interrupted = True
        # Between calls it is a stop for a call that has already been answered: nothing to do.

    def prepare(self) -> None:
        """Fork the next call's child between requests (the host is busy with our answer), so the
        fork costs no call its time and the child never holds a request's id."""
        if self.spare is not None and (self.spare.imported != self.imported or not self.spare.alive()):
            self.spare.discard()
            self.spare = None
        if self.spare is None:
            self.spare = self.fork()

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
        head = _params(raw, CallHead)
        self.load(head.entrypoint)  # in the zygote, so the next calls' children have it imported
        child, self.spare = self.spare, None
        if child is None or not child.alive():
            # Only when the spare died: this child is forked with the request (its id) in memory.
            child = self.fork()
        # A spare forked before this import imports the module itself: the cost of a first call.
        if self.cgroup is not None:
            self.cgroup.set_limits(head.limits)
        watch = Watch(head.limits, head.context.workspace, self.cgroup)
        self.running, self.interrupted = child, False
        try:
            status, data, stopped = self.wait(child, bytes(raw), watch)
            _kill_descendants()
            data += _read_rest(child.result_r)  # no writer is left: all of it is there
        finally:
            self.running = None
            _kill_descendants()
            child.close()
        if stopped is not None:
            raise stopped
        return self.answer(status, data, watch)

    def wait(self, child: Spare, params: bytes, watch: Watch) -> tuple[int | None, bytearray, Failure | None]:
        """Hand the call to ``child`` and collect its answer until it exits, a limit is passed or
        the host's SIGINT has had its grace: (wait status or None, answer bytes, why it was stopped)."""
        try:
            _write_all(child.params_w, params)
        except OSError:
            pass  # it died before reading: its status tells why
        os.close(child.params_w)
        child.params_w = -1
        data = bytearray()
        cap = self.config.output_bytes + (1 << 20)
        reading = True
        interrupted_at: float | None = None
        next_check = time.monotonic() + _POLL
        while True:
            status = child.poll()
            if status is not None:
                return status, data, None
            now = time.monotonic()
            if self.interrupted and interrupted_at is None:
                interrupted_at = now
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGINT)
            if interrupted_at is not None and now - interrupted_at > CHILD_GRACE:
                return None, data, Failure("cancelled", "the call was stopped")
            if now >= next_check:
                next_check = now + _POLL
                passed = watch.check()
                if passed is not None:
                    return None, data, passed
            timeout = next_check - now
            if interrupted_at is not None:
                timeout = min(timeout, interrupted_at + CHILD_GRACE - now)
            ready = select.select([child.result_r, self.wake_r] if reading else [self.wake_r], [], [],
                                  max(timeout, 0.0))[0]
            if self.wake_r in ready:
                _drain(self.wake_r)
            if child.result_r in ready:
                chunk = _read_some(child.result_r)
                if chunk is None:
                    continue
                if not chunk:
                    reading = False  # every copy of the write end is closed; the exit comes next
                data += chunk
                if len(data) > cap:
                    return None, data, Failure("output", f"the tool's result is over the limit of "
                                                         f"{_size(self.config.output_bytes)}")

    def answer(self, status: int | None, data: bytearray, watch: Watch) -> dict[str, Any]:
        """The call's result from what its child sent and how it ended."""
        signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
        if signum is not None:
            passed = watch.after_kill()
            if passed is not None:
                raise passed
            raise Failure("crashed", f"the tool's process was killed by {_signal_name(signum)}")
        passed = watch.check(final=True)
        try:
            reply = _unframe(data)
        except msgspec.DecodeError:
            # Only a process of this call can write there: the tool wrote into its own channel.
            raise Failure("output", "the tool's answer could not be read: the tool or a process it "
                                    "started wrote into the call's result channel") from None
        if passed is not None:
            raise passed
        if reply is None:
            code = os.WEXITSTATUS(status) if status is not None else None
            raise Failure("crashed", f"the tool's process exited with code {code} before answering")
        if reply.error is not None:
            kind = reply.error.data.get("kind")
            if kind not in _KINDS:
                raise Failure("output", "the tool's answer could not be read: it reports an unknown failure")
            raise Failure(str(kind), reply.error.message, reply.error.code, **{
                k: v for k, v in reply.error.data.items() if k != "kind"})
        if not reply.result:
            raise Failure("output", "the tool's answer could not be read: it holds no result")
        return {"result": reply.result}

    # -- the call's child --------------------------------------------------------------------------

    def fork(self) -> Spare:
        if not self.warned_threads and _thread_count() > 1:
            # fork copies only this thread: a lock another thread holds stays locked in the child,
            # which then hangs until the call's timeout. Only a module's top-level code can start one.
            self.warned_threads = True
            print("covalt worker: a module of this toolset started a thread at import; calls may hang "
                  "until their timeout", file=sys.stderr)
        params_r, params_w = os.pipe()
        result_r, result_w = os.pipe()
        sys.stderr.flush()
        # Every page the child writes is copied (a few µs each on a VM): objects moved out of the
        # collector's generations are never walked, so a collection in the child copies only its own.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            os.close(params_w)
            os.close(result_r)
            self.child_main(params_r, result_w)  # never returns
        os.close(params_r)
        os.close(result_w)
        os.set_blocking(result_r, False)
        spare = Spare(pid, params_w, result_r, self.imported)
        if self.cgroup is not None:
            self.cgroup.enter(pid)
        return spare

    def child_main(self, params_r: int, result_w: int) -> None:
        """The call's process: wait for the call, run it, send the answer on ``result_w``, exit."""
        code = 0
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for fd in (self.wire_in, self.wire_out, self.wake_r, self.wake_w):
                os.close(fd)
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            _prctl(_PR_SET_DUMPABLE, 1)  # its own processes may inspect it (not the zygote)
            # Below the sidecar's priority: a call's 64 busy processes must not starve its answers
            # (ping within 50 ms while a fork bomb runs).
            with contextlib.suppress(OSError):
                os.nice(_NICE)
            tasks = None if self.cgroup is not None or os.geteuid() == 0 else _user_tasks()
            self.rehearse()
            raw = _read_all(params_r)
            os.close(params_r)
            if not raw:
                os._exit(0)  # discarded spare, or the zygote is gone
            answer = self.child_call(raw, tasks)
        except BaseException as exc:  # noqa: BLE001 - the child must answer whatever happens
            answer = self.child_error(Failure("crashed", f"the call's process failed: {_describe(exc)}"))
            code = 1
        try:
            # The answer goes last, its length after it: bytes the tool wrote onto this pipe before
            # are skipped, and any written after (by a process it left) spoil it (a clear error).
            _write_all(result_w, answer + _TRAILER.pack(len(answer)))
        except OSError:
            code = 1
        sys.stderr.flush()
        os._exit(code)

    def rehearse(self) -> None:
        """Decode a made-up call and encode an answer while nothing waits on us: the pages this
        touches are copied now rather than during the call. Made up, never the last call's
        parameters: the next call may be another chat's."""
        params = msgspec.json.decode(_REHEARSAL, type=CallParams)
        self.child_error(Failure("raised", params.tool, type="", traceback=""))

    def child_call(self, raw: bytes, tasks: int | None) -> bytes:
        try:
            params = _params(raw, CallParams)
            _call_limits(params.limits, tasks, self.cgroup is not None)
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
            result = self.run(invoke, ctx, params.limits)
            data = self.encode_result(result)
        except Failure as failure:
            return self.child_error(failure)
        return b'{"result":' + data + b"}"

    def child_error(self, failure: Failure) -> bytes:
        return self.encoder.encode({"error": {"code": failure.code, "message": failure.message, "data": failure.data}})

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
            passed = _limit_error(exc, limits)
            if passed is not None:
                raise passed from None
            raise self.raised(exc) from None
        except Exception as exc:
            raise self.raised(exc) from None
        finally:
            self.sdk.clear_context(token)

    def raised(self, exc: BaseException) -> Failure:
        name = type(exc).__name__
        return Failure("raised", _describe(exc), type=name, traceback=_format_traceback(exc, self.config.toolset_dir))

    def memory_failure(self, exc: MemoryError, limits: CallLimits) -> Failure:
        self.reserve = None
        # The frames' locals are what filled the memory; the traceback would keep them alive.
        traceback.clear_frames(exc.__traceback__)
        return _limit_failure("memory", limits.memory_bytes, "MemoryError: the tool needed more memory than",
                              type="MemoryError", traceback=_format_traceback(exc, self.config.toolset_dir))

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


def _params(raw: msgspec.Raw | bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as exc:
        raise Failure("protocol", f"invalid params: {exc}", INVALID_PARAMS) from None


def _lines(fd: int, idle_seconds: float, before_wait: Callable[[], None]) -> Iterator[bytes]:
    """Request lines from ``fd`` until EOF, or until no request came for ``idle_seconds``;
    ``before_wait`` runs whenever no whole line is buffered."""
    buf = bytearray()
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            if line.strip():
                yield line
            continue
        before_wait()
        if not _wait_readable(fd, idle_seconds):
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


# -- a call's processes ----------------------------------------------------------------------------


class Spare:
    """A forked child waiting for its call on ``params_w``; it answers on ``result_r``."""

    def __init__(self, pid: int, params_w: int, result_r: int, imported: int) -> None:
        self.pid = pid
        self.params_w = params_w
        self.result_r = result_r
        self.imported = imported
        self.status: int | None = None

    def poll(self) -> int | None:
        """Its wait status once it has exited (then it is reaped), else None."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (_kill_descendants)
                self.status = 0
            else:
                if pid:
                    self.status = status
        return self.status

    def alive(self) -> bool:
        return self.poll() is None

    def discard(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.close()
        if self.status is None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)

    def close(self) -> None:
        for fd in (self.params_w, self.result_r):
            if fd >= 0:
                os.close(fd)
        self.params_w = self.result_r = -1


class Cgroup:
    """The cgroup the host made for this worker's calls (v1: a folder per controller)."""

    def __init__(self, config: CgroupConfig) -> None:
        dirs = config.dirs
        self.version = config.version
        self.procs = [os.path.join(d, "cgroup.procs") for d in dirs.values()]
        self.pids = dirs.get("pids") or dirs.get("unified")
        self.memory = dirs.get("memory") or dirs.get("unified")
        self.limits: CallLimits | None = None
        self.fixed = config.fixed
        self.failed = False

    def enter(self, pid: int) -> None:
        for path in self.procs:
            self._write(path, str(pid))

    def set_limits(self, limits: CallLimits) -> None:
        if limits == self.limits or self.fixed:
            return
        self.limits = limits
        if self.pids:
            self._write(os.path.join(self.pids, "pids.max"), str(limits.max_processes))
        if self.memory is None:
            return
        value = str(limits.memory_bytes)
        if self.version == 2:
            self._write(os.path.join(self.memory, "memory.max"), value)
            self._write(os.path.join(self.memory, "memory.swap.max"), "0", quiet=True)
            return
        memory = os.path.join(self.memory, "memory.limit_in_bytes")
        swap = os.path.join(self.memory, "memory.memsw.limit_in_bytes")  # only with swap accounting
        # memsw may never be below memory: the order depends on which way the limit moves.
        if not self._write(memory, value, quiet=True):
            self._write(swap, value, quiet=True)
            self._write(memory, value)
        else:
            self._write(swap, value, quiet=True)

    def pids_max_hits(self) -> int:
        return _counter(os.path.join(self.pids, "pids.events"), "max") if self.pids else 0

    def oom_kills(self) -> int:
        if self.memory is None:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _counter(os.path.join(self.memory, name), "oom_kill")

    def _write(self, path: str, value: str, quiet: bool = False) -> bool:
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as exc:
            if not quiet and not self.failed:
                self.failed = True
                print(f"covalt worker: cannot write {value} to {path}: {exc.strerror}", file=sys.stderr)
            return False
        return True


class Watch:
    """The limits a running call is held to that no rlimit enforces: its processes together (the
    cgroup's counters) and the growth of its workspace's file system."""

    def __init__(self, limits: CallLimits, workspace: str, cgroup: Cgroup | None) -> None:
        self.limits = limits
        self.workspace = workspace
        self.cgroup = cgroup
        self.started = time.time()
        self.base = _fs_used(workspace)
        self.trigger = limits.disk_bytes  # growth of the file system that makes us look closer
        self.pids_hits = cgroup.pids_max_hits() if cgroup is not None else 0
        self.ooms = cgroup.oom_kills() if cgroup is not None else 0

    def check(self, final: bool = False) -> Failure | None:
        if not final and self.cgroup is not None and self.cgroup.pids_max_hits() > self.pids_hits:
            return _limit_failure("processes", self.limits.max_processes,
                                  "the tool tried to run more processes at once than")
        return self.disk()

    def after_kill(self) -> Failure | None:
        """Why the call's process was killed by a signal, when a limit did it."""
        if self.cgroup is not None and self.cgroup.oom_kills() > self.ooms:
            return _limit_failure("memory", self.limits.memory_bytes,
                                  "the call's processes used more memory than", killed=True)
        return self.check()

    def disk(self) -> Failure | None:
        if self.base is None:
            return None
        used = _fs_used(self.workspace)
        if used is None or used - self.base <= self.trigger:
            return None
        # The file system grew past the quota, perhaps by other writers: count what this call wrote.
        total, files = _written_since(self.workspace, self.started)
        if total <= self.limits.disk_bytes:
            self.trigger = used - self.base + self.limits.disk_bytes // 4
            return None
        listed = ", ".join(f"{name} ({_size(size)})" for size, name in files)
        return _limit_failure(
            "disk", self.limits.disk_bytes, f"the call wrote {_size(total)} into its workspace, more than",
            note=f"The files it wrote are kept (they may be rewrites of your own files): {listed}; "
                 "delete the ones you do not need.")


def _limit_failure(limit: str, value: int, lead: str, killed: bool = False, note: str = "", **data: Any) -> Failure:
    setting = _SETTINGS[limit]
    shown = f"{value} processes" if limit == "processes" else _size(value)
    per_call = " per call" if limit == "disk" else ""
    stopped = "; the call was stopped" if limit != "memory" or killed else ""
    message = f"{limit} limit: {lead} its limit of {shown}{per_call} (raise it with {setting}){stopped}."
    if note:
        message += " " + note
    return Failure("limit", message, limit=limit, value=value, setting=setting, **data)


def _limit_error(exc: OSError, limits: CallLimits) -> Failure | None:
    """The limit an error a tool let through comes from, if it is one of ours."""
    if exc.errno == errno.EFBIG:
        return _limit_failure("disk", limits.disk_bytes, "the tool tried to write a file larger than")
    if exc.errno == errno.EAGAIN and _raised_by_fork(exc):
        return _limit_failure("processes", limits.max_processes, "the tool tried to run more processes at once than")
    return None


def _raised_by_fork(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    return "fork" in (last.line or "") or last.name in ("_execute_child", "_launch", "start_new_thread")


def _unframe(data: bytearray) -> ChildAnswer | None:
    """The answer at the end of what a call's child sent (None when it sent nothing).

    Raises:
        msgspec.DecodeError: not an answer followed by its length.
    """
    if not data:
        return None
    if len(data) < _TRAILER.size:
        raise msgspec.DecodeError("too short")
    (size,) = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    start = len(data) - _TRAILER.size - size
    if start < 0:
        raise msgspec.DecodeError("bad length")
    return msgspec.json.decode(memoryview(data)[start:len(data) - _TRAILER.size], type=ChildAnswer)


def _counter(path: str, name: str) -> int:
    """One counter of a cgroup's events file ("max 3", "oom_kill 1"); 0 when it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _fs_used(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _written_since(folder: str, since: float, top: int = 5) -> tuple[int, list[tuple[int, str]]]:
    """Bytes on disk of the files under ``folder`` changed at or after ``since``, and the biggest."""
    total, found = 0, []
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_file(follow_symlinks=False) and st.st_mtime >= since - 1:
                size = st.st_blocks * 512
                total += size
                found.append((size, os.path.relpath(entry.path, folder)))
    found.sort(reverse=True)
    return total, found[:top]


def _kill_descendants() -> None:
    """Stop, kill and reap every process below this one. A process this one is subreaper of is
    either its child or below one: with no child left there is nothing to walk."""
    if not _has_children():
        return
    me, stopped = os.getpid(), set()
    for _ in range(_KILL_ROUNDS):
        # Stopped first, all of them, so none forks a process the walk has not seen.
        found = _descendants(me) - stopped
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0  # a process in uninterruptible sleep dies when it wakes
    while _has_children() and time.monotonic() < deadline:
        time.sleep(0.001)


def _has_children() -> bool:
    """Reap the children that have exited; whether any is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        threading = sys.modules.get("threading")
        return threading.active_count() if threading is not None else 1


def _wait_readable(fd: int, timeout: float) -> bool:
    while True:
        try:
            return bool(select.select([fd], [], [], timeout)[0])
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for signal handlers that raise
            continue


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_some(fd: int) -> bytes | None:
    """What a non-blocking pipe holds, b"" at EOF, None when it holds nothing yet."""
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return None


def _read_rest(fd: int) -> bytes:
    chunks = []
    while chunk := _read_some(fd):
        chunks.append(chunk)
    return b"".join(chunks)


def _drain(fd: int) -> None:
    while _read_some(fd):
        pass


def _ignore(signum: int, frame: Any) -> None:
    """A handler that does nothing: its signal then wakes select through the wakeup fd."""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if _LIBC is None:
        return False
    return _LIBC.prctl(option, value, 0, 0, 0) == 0


def _call_limits(limits: CallLimits, tasks: int | None, in_cgroup: bool) -> None:
    """The rlimits of a call's process, soft and hard, so neither it nor its children raise them.
    RLIMIT_DATA rather than RLIMIT_AS: glibc reserves 64 MiB of address space per thread arena."""
    _limit("RLIMIT_DATA", limits.memory_bytes)
    _limit("RLIMIT_FSIZE", limits.disk_bytes)
    if tasks is not None and not in_cgroup:
        # RLIMIT_NPROC caps all of the user's processes, not ours: leave room for what runs now.
        _limit("RLIMIT_NPROC", tasks + limits.max_processes)


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
    """The worker's own limits: soft ones, so each call's child can set its own (lower or higher)."""
    # An oversized write then fails with OSError (EFBIG) in the tool instead of killing its process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _limit("RLIMIT_DATA", config.memory_bytes, soft_only=True)
    _limit("RLIMIT_FSIZE", config.file_bytes, soft_only=True)


def _limit(name: str, value: int, soft_only: bool = False) -> None:
    which = getattr(resource, name)
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        # The hard limit too (in a call's child), so neither a tool nor its children can raise it.
        resource.setrlimit(which, (value, hard if soft_only else value))
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


def _exit(code: int) -> None:
    """Leave without waiting for threads, after killing every process of the calls (and the
    spare): the host may be gone, and then nobody else would."""
    _kill_descendants()
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
    if not _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
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
    # The calls' children cannot open this process's pipes through /proc/<pid>/fd, and every
    # process they start, daemons included, is re-parented to this one when its parent exits.
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    # The toolset folder is managed content: no __pycache__ may appear in it.
    sys.dont_write_bytecode = True
    sys.path[:0] = [config.sdk_dir, config.toolset_dir]
    sdk = importlib.import_module("covalt_toolset")
    os.chdir(config.toolset_dir)
    Worker(config, wire_in, wire_out, sdk).serve()
    _exit(0)


if __name__ == "__main__":
    main(sys.argv)
