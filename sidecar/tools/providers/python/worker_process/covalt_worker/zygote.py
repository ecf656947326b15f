"""The worker's main loop: requests from the host, each call handed to a child forked ahead of it,
the call watched and its processes ended, the answer sent back."""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import msgspec

from .child import Child
from .limits import POLL, Cgroup, Watch
from .messages import signal_name, size_text
from .pipes import drain, read_rest, read_some, request_lines, write_all
from .procs import Spare, held_fds, ignore_signal, kill_descendants, left_behind, pass_interrupt, thread_count
from .protocol import (
    KINDS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CallHead,
    Config,
    DescribeParams,
    Failure,
    Request,
    decode_params,
    framed,
    unframe,
)
from .tools import Toolset

ANSWERED = 0  # the wait status ``wait`` gives a child that answered and was killed before its exit
CHILD_GRACE = 0.5  # seconds a call's child gets to unwind after SIGINT before it is killed


class Worker:
    def __init__(self, config: Config, wire_in: int, wire_out: int, sdk: ModuleType) -> None:
        self.config = config
        self.tools = Toolset(config, sdk)
        self.wire_in = wire_in
        self.wire_out = wire_out
        self.stopping = False
        self.spare: Spare | None = None
        self.running: Spare | None = None  # the call's child while a call runs
        self.dying: list[int] = []  # answered calls' children, killed, their exit not yet collected
        self.interrupted = False  # SIGINT came during the call
        self.warned_threads = False
        self.cgroup = Cgroup(config.cgroup) if config.cgroup is not None else None
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
        signal.signal(signal.SIGCHLD, ignore_signal)
        signal.signal(signal.SIGINT, self.on_sigint)
        for line in request_lines(self.wire_in, self.config.idle_seconds, self.prepare, self.wake_r):
            self.handle(line)
            if self.stopping:
                return

    def on_sigint(self, signum: int, frame: Any) -> None:
        if self.running is not None:
            self.interrupted = True

    def prepare(self) -> None:
        """Have the next call's child ready: forked here, between requests (after an answer is
        sent, see ``wait``). A spare forked before the last import lacks the module: it is replaced."""
        self.reap()
        if self.spare is not None and (self.spare.imported != self.tools.imported or not self.spare.alive()):
            self.spare.discard()
            self.spare = None
        if self.spare is None:
            with contextlib.suppress(OSError):  # no process to spare now (EAGAIN): the call forks its own
                self.spare = self.fork()

    def reap(self) -> None:
        """Collect the answered children once their exit is done (it ends them in the cgroup's count)."""
        reaped = False
        for pid in list(self.dying):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] != 0
            except ChildProcessError:  # reaped by kill_descendants
                done = True
            if done:
                self.dying.remove(pid)
                reaped = True
        if reaped and not self.dying and self.running is None and left_behind(self.keep()):
            # A process an answered child was forking as it was killed, after the cgroup was read
            # (``kill_descendants``): it came to us with the child's exit.
            kill_descendants(self.keep())

    def members(self) -> set[int] | None:
        """The processes in the calls' cgroup but answered children still exiting: each was
        looked at for what it left when it answered (and what it left is in the group)."""
        held = self.cgroup.members() if self.cgroup is not None else None
        return held - set(self.dying) if held is not None else None

    def keep(self) -> int:
        return self.spare.pid if self.spare is not None else 0

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
        params = decode_params(raw, DescribeParams)
        out: dict[str, Any] = {}
        for tool_id, entrypoint in params.tools.items():
            try:
                out[tool_id] = {"ok": self.tools.describe(entrypoint)}
            except Failure as failure:
                out[tool_id] = {"error": failure.message}
        return out

    def call(self, raw: msgspec.Raw) -> dict[str, Any]:
        head = decode_params(raw, CallHead)
        self.tools.load(head.entrypoint)  # in the zygote, so the next calls' children have it imported
        self.tools.last = head.entrypoint
        self.reap()
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
            dying = child.pid if child.answered and child.status is None else 0
            kill_descendants(self.keep(), dying, self.members if self.cgroup is not None else None)
            if dying:
                self.dying.append(dying)
            data += read_rest(child.result_r)  # no writer is left: all of it is there
        except BaseException:
            kill_descendants(self.keep())
            raise
        finally:
            self.running = None
            child.close()
        if stopped is not None:
            raise stopped
        return self.answer(status, data, watch)

    def wait(self, child: Spare, params: bytes, watch: Watch) -> tuple[int | None, bytearray, Failure | None]:
        """Hand the call to ``child`` and collect its answer until it exits, a limit is passed or
        the host's SIGINT has had its grace: (wait status or None, answer bytes, why it was stopped)."""
        hand_over(child, params)
        # The next call's child is forked once this call is answered (``prepare``, before the
        # worker waits for the next request), not while it runs: the fork and moving the spare
        # into the cgroup (a write that waits for the kernel's RCU, often a millisecond or more)
        # would hold the answer back whenever the call is quicker than they are, and on a busy
        # machine they compete with the call for a core. The host's own work on the answer (the
        # workspace's snapshot, the record) leaves them the time before a next call comes.
        data = bytearray()
        cap = self.config.output_bytes + (1 << 20)
        reading = True
        interrupted_at: float | None = None
        next_check = time.monotonic() + POLL
        while True:
            status = child.poll()
            if status is not None:
                return status, data, None
            now = time.monotonic()
            if self.interrupted and interrupted_at is None:
                interrupted_at = now
                pass_interrupt(child.pid)
            if interrupted_at is not None and now - interrupted_at > CHILD_GRACE:
                return None, data, Failure("cancelled", "the call was stopped")
            if now >= next_check:
                next_check = now + POLL
                passed = watch.check()
                if passed is not None:
                    return None, data, passed
            timeout = next_check - now
            if interrupted_at is not None:
                timeout = min(timeout, interrupted_at + CHILD_GRACE - now)
            ready = select.select([child.result_r, self.wake_r] if reading else [self.wake_r], [], [],
                                  max(timeout, 0.0))[0]
            if self.wake_r in ready:
                drain(self.wake_r)
            if child.result_r in ready:
                chunk = read_some(child.result_r)
                if chunk is None:
                    continue
                if not chunk:
                    reading = False  # every copy of the write end is closed; the exit comes next
                    if framed(data):
                        # The child closed its channel after a whole answer: it only has to exit,
                        # and tearing down its memory takes about a millisecond. It is killed, so
                        # it runs nothing more, and the call does not wait for that.
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(child.pid, signal.SIGKILL)
                        child.answered = True
                        return ANSWERED, data, None
                data += chunk
                if len(data) > cap:
                    return None, data, Failure("output", f"the tool's result is over the limit of "
                                                         f"{size_text(self.config.output_bytes)}")

    def answer(self, status: int | None, data: bytearray, watch: Watch) -> dict[str, Any]:
        """The call's result from what its child sent and how it ended."""
        signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
        if signum is not None:
            passed = watch.after_kill()
            if passed is not None:
                raise passed
            raise Failure("crashed", f"the tool's process was killed by {signal_name(signum)}")
        passed = watch.check(final=True)
        try:
            reply = unframe(data)
        except msgspec.DecodeError:
            # Only a process of this call can write there: the tool wrote into its own channel.
            raise Failure("output", "the tool's answer could not be read: the tool or a process it "
                                    "started wrote into the call's result channel") from None
        if passed is not None:
            raise passed
        if reply is None:
            code = os.WEXITSTATUS(status) if status is not None else None
            crashed = f"the tool's process exited with code {code} before answering"
            raise watch.memory_killed(note=f"Then {crashed}.") or Failure("crashed", crashed)
        if reply.error is not None:
            kind = reply.error.data.get("kind")
            if kind not in KINDS:
                raise Failure("output", "the tool's answer could not be read: it reports an unknown failure")
            details = {k: v for k, v in reply.error.data.items() if k != "kind"}
            if kind in ("raised", "crashed"):
                # A process the tool started was killed for the call's memory (the tool's own would
                # have ended the call by a signal): that is why the tool failed, in its own words after.
                passed = watch.memory_killed(note=f"The kernel stopped a process of the call; the tool then "
                                                  f"failed: {reply.error.message}", **details)
                if passed is not None:
                    raise passed
            raise Failure(str(kind), reply.error.message, reply.error.code, **details)
        # A tool that answered although a process of it was killed for memory keeps its answer: it
        # handled that process's end (a retry, a smaller job, a partial result) and its value is its
        # own account of it; failing the call would throw that work away.
        if not reply.result:
            raise Failure("output", "the tool's answer could not be read: it holds no result")
        return {"result": reply.result}

    def shutdown(self, raw: msgspec.Raw) -> dict[str, Any]:
        self.stopping = True
        return {}

    # -- the call's child --------------------------------------------------------------------------

    def fork(self) -> Spare:
        if not self.warned_threads and thread_count() > 1:
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
            inherited = (self.wire_in, self.wire_out, self.wake_r, self.wake_w, *held_fds(),
                         *((self.running.result_r,) if self.running is not None else ()))
            limited = self.cgroup is not None and self.cgroup.limited
            Child(self.tools, limited, inherited).main(params_r, result_w)  # never returns
        os.close(params_r)
        os.close(result_w)
        os.set_blocking(result_r, False)
        spare = Spare(pid, params_w, result_r, self.tools.imported)
        if self.cgroup is not None:
            self.cgroup.enter(pid)
        return spare

    # -- output ----------------------------------------------------------------------------------

    def send_error(self, request_id: Any, failure: Failure) -> None:
        error = {"code": failure.code, "message": failure.message, "data": failure.data}
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(self.tools.encoder.encode(message) + b"\n")
        while data:
            data = data[os.write(self.wire_out, data):]


def hand_over(child: Spare, params: bytes) -> None:
    """Give ``child`` its call's parameters and close its pipe: it starts the call on EOF."""
    try:
        write_all(child.params_w, params)
    except OSError:
        pass  # it died before reading: its status tells why
    os.close(child.params_w)
    child.params_w = -1
