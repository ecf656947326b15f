"""A call's process: forked from the zygote ahead of its call, it waits for the call's parameters
on its own pipe, runs the tool, writes the answer (its length after it) and exits."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import msgspec

from .limits import NICE, call_limits, user_tasks
from .messages import describe_exc
from .pipes import read_all, write_all
from .procs import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl
from .protocol import TRAILER, CallParams, Failure, decode_params
from .tools import Toolset

_REHEARSAL = (b'{"tool":"t","entrypoint":"m:f","args":{"a":"b","n":1},"inputSchema":null,'
              b'"context":{"workspace":"/","chatId":"c","toolCallId":"t","settings":{},"telemetry":{}},'
              b'"limits":{"memoryBytes":1,"maxProcesses":1,"diskBytes":1}}')


class Child:
    def __init__(self, tools: Toolset, in_cgroup: bool, inherited: tuple[int, ...]) -> None:
        self.tools = tools
        self.in_cgroup = in_cgroup
        self.inherited = inherited  # the zygote's descriptors, closed first

    def main(self, params_r: int, result_w: int) -> None:
        """The call's process: wait for the call, run it, send the answer on ``result_w``, exit."""
        code = 0
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            # A spare waits while the previous call runs, in the process group the host interrupts
            # that call through: the interrupt is not for it.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for fd in self.inherited:
                os.close(fd)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            prctl(PR_SET_DUMPABLE, 1)  # its own processes may inspect it (not the zygote)
            # Below the sidecar's priority: a call's 64 busy processes must not starve its answers
            # (ping within 50 ms while a fork bomb runs).
            with contextlib.suppress(OSError):
                os.nice(NICE)
            tasks = None if self.in_cgroup or os.geteuid() == 0 else user_tasks()
            self.rehearse()
            raw = read_all(params_r)
            os.close(params_r)
            if not raw:
                os._exit(0)  # discarded spare, or the zygote is gone
            signal.signal(signal.SIGINT, signal.default_int_handler)  # this call's interrupt, from now on
            answer = self.call(raw, tasks)
        except BaseException as exc:  # noqa: BLE001 - the child must answer whatever happens
            answer = self.tools.error(Failure("crashed", f"the call's process failed: {describe_exc(exc)}"))
            code = 1
        try:
            # The answer goes last, its length after it: bytes the tool wrote onto this pipe before
            # are skipped, and any written after (by a process it left) spoil it (a clear error).
            write_all(result_w, answer + TRAILER.pack(len(answer)))
            os.close(result_w)  # the worker answers at this end of the pipe, not at our exit
        except OSError:
            code = 1
        sys.stderr.flush()
        os._exit(code)

    def rehearse(self) -> None:
        """Go through a made-up call while nothing waits on us, up to the tool but never into it
        (``bind`` only checks arguments, which these fail): the pages this touches are copied now
        rather than during the call. Made up, never a real call's parameters."""
        tools = self.tools
        params = msgspec.json.decode(_REHEARSAL, type=CallParams)
        ctx = tools.context(params)
        last = tools.functions.get(tools.last)
        if last is not None:
            with contextlib.suppress(Failure):
                tools.bind(last, params, ctx)
        tools.sdk.clear_context(tools.sdk.set_context(ctx))
        tools.encode_result({"path": params.tool, "size": 1})
        tools.error(Failure("raised", params.tool, type="", traceback=""))

    def call(self, raw: bytes, tasks: int | None) -> bytes:
        try:
            params = decode_params(raw, CallParams)
            call_limits(params.limits, tasks, self.in_cgroup)
            tools = self.tools
            fn = tools.load(params.entrypoint)
            ctx = tools.context(params)
            invoke = tools.bind(fn, params, ctx)
            try:
                os.chdir(ctx.workspace)
            except OSError as exc:
                raise Failure("load", f"cannot enter the workspace {ctx.workspace}: {exc.strerror}") from None
            result = tools.run(invoke, ctx, params.limits)
            data = tools.encode_result(result)
        except Failure as failure:
            return self.tools.error(failure)
        return b'{"result":' + data + b"}"
