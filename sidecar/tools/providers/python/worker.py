"""One worker process as the host sees it: the request/answer wire, matched by id, and how a
failed call becomes a ``ToolFailure``. ``workers.py`` keeps the pools of these."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import deque
from contextlib import suppress
from typing import Any

import anyio
import msgspec

from ....children import KILL_WAIT, Child, exit_reason
from ....ndjson import Frame, Line, LineSplitter, LineTooLong
from ....sandbox.cgroups import WorkerGroup

log = logging.getLogger("sidecar.tools")

_WORKER_KINDS = {"arguments", "raised", "limit", "crashed", "load", "output", "cancelled"}

# Seconds the worker gets to answer a stopped call: its child has 0.5 s to unwind after SIGINT
# (covalt_worker.zygote.CHILD_GRACE), then the worker kills the call's processes and answers.
INTERRUPT_GRACE = 1.5
STOP_GRACE = 0.5  # seconds between closing stdin, SIGTERM and SIGKILL
EXIT_DRAIN = 0.2  # an answer written just before exiting may still be in the pipe
_DECODE_IN_THREAD = 1 << 20  # bytes: bigger answers are decoded off the event loop


class ToolFailure(Exception):
    """One call failed; the sidecar keeps serving."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        path: str | None = None,
        traceback: str | None = None,
        stderr_tail: str | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit  # for "limit": "memory", "processes" or "disk"
        self.message = message  # says what happened and what to do
        self.path = path  # for "arguments": where in the call, e.g. "args.config.items[2]"
        self.traceback = traceback
        self.stderr_tail = stderr_tail  # the worker's last stderr lines, for crashed/timeout


class WireError(msgspec.Struct):
    code: int
    message: str
    data: dict[str, Any] | None = None


class Reply(msgspec.Struct):
    id: int | str | None = None
    result: Any = None
    error: WireError | None = None


class CallAnswer(msgspec.Struct):
    result: msgspec.Raw


class CallReply(msgspec.Struct):
    # The tool's value stays the worker's JSON (checked, not built): a caller that only stores
    # and forwards it never pays for building, and re-encoding, a big result.
    id: int | str | None = None
    result: CallAnswer | None = None
    error: WireError | None = None


REPLY = msgspec.json.Decoder(Reply)
CALL_REPLY = msgspec.json.Decoder(CallReply)
Decoder = msgspec.json.Decoder[Reply] | msgspec.json.Decoder[CallReply]
ENCODER = msgspec.json.Encoder()


class Worker:
    """One worker process, serving one request at a time. Its answers are matched by id, and ids
    are random: a line something managed to write onto the pipe is skipped, never taken for the
    answer (a call's child never sees its request's id: the worker forks it beforehand)."""

    def __init__(self, child: Child, generation: int, max_line: int, group: WorkerGroup | None = None) -> None:
        self.child = child
        self.generation = generation
        self.group = group  # the cgroup of its calls, removed when it stops
        self.reusable = True
        self._max_line = max_line
        self._splitter = LineSplitter(max_line)
        self._frames: deque[Frame] = deque()
        self._idle_since = time.monotonic()

    @property
    def alive(self) -> bool:
        return self.child.alive

    def idle_for(self) -> float:
        return time.monotonic() - self._idle_since

    async def request(
        self, method: str, params: dict[str, Any], limit: float, what: str, decoder: Decoder = REPLY
    ) -> Any:
        request_id = secrets.randbits(62)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        line = ENCODER.encode(message) + b"\n"
        reply: Reply | CallReply | LineTooLong | _TooDeep | None = None
        try:
            with anyio.move_on_after(limit) as deadline:
                reply = await self._exchange(line, request_id, decoder)
        except anyio.get_cancelled_exc_class():
            await self._interrupt(request_id, decoder)
            raise
        if deadline.cancelled_caught:
            kept = await self._interrupt(request_id, decoder)
            ending = "" if kept else " and its worker restarted"
            raise ToolFailure(
                "timeout",
                f"{what} did not finish within {limit:g} s, its time limit (raise it with "
                f"constraints.timeout_seconds); the call was stopped{ending}",
                stderr_tail=self.child.stderr_text() or None,
            )
        self._idle_since = time.monotonic()
        if reply is None:
            raise await self._ended(what)
        if isinstance(reply, LineTooLong):
            raise ToolFailure(
                "output", f"{what}: the worker's answer is {reply.size} bytes, over the limit of {self._max_line}"
            )
        if isinstance(reply, _TooDeep):
            raise ToolFailure("output", f"{what}: the worker's answer is nested too deeply to be read")
        if reply.error is not None:
            failure = self._failure(reply.error, what)
            if failure.kind == "crashed" and self.reusable:
                # The call's process died (the worker lives on): what it said last is in stderr.
                await anyio.sleep(EXIT_DRAIN / 4)
                failure.stderr_tail = self.child.stderr_text() or None
                if failure.stderr_tail:
                    failure.message += f"\nLast lines of its stderr:\n{failure.stderr_tail}"
            raise failure
        return reply.result

    def kill(self) -> None:
        self.reusable = False
        self.child.kill()
        if self.group is not None:
            self.group.remove()  # kills what is left in it first

    async def stop(self) -> None:
        """Close stdin (the worker exits at EOF), then SIGTERM and SIGKILL its process group,
        each after a short wait. Idempotent; always runs to the end, even when cancelled."""
        self.reusable = False
        await self.child.stop(stdin_grace=STOP_GRACE, term_grace=STOP_GRACE)
        if self.group is not None:
            self.group.remove()

    # -- one exchange ----------------------------------------------------------------------------

    async def _exchange(
        self, line: bytes, request_id: int, decoder: Decoder
    ) -> Reply | CallReply | LineTooLong | _TooDeep | None:
        try:
            await self.child.stdin.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the worker is gone: reading tells how it ended
        while True:
            frame = await self._next_frame()
            if frame is None or isinstance(frame, LineTooLong):
                return frame
            try:
                reply = await _decode(decoder, frame)
            except RecursionError:
                if _head_id(frame) == request_id:
                    return _TOO_DEEP
                reply = None
            if reply is not None and reply.id == request_id:
                return reply
            # Not ours: something a tool wrote onto the pipe, or an answer to a request given up on.
            log.warning("%s: skipped a line from the worker that is not the answer to request %d: %r",
                        self.child.label, request_id, frame[:200])

    async def _next_frame(self) -> Frame | None:
        """The next line the worker writes, or None once it has exited without one."""
        frame: Frame | None = None
        async with anyio.create_task_group() as tg:
            # Waiting for the exit too, not only for EOF: a child the tool forked holds the pipe.
            tg.start_soon(self._cancel_on_exit, tg.cancel_scope)
            frame = await self._read_frame()
            tg.cancel_scope.cancel()
        return frame

    async def _cancel_on_exit(self, scope: anyio.CancelScope) -> None:
        await self.child.process.wait()
        await anyio.sleep(EXIT_DRAIN)
        scope.cancel()

    async def _read_frame(self) -> Frame | None:
        while not self._frames:
            try:
                chunk = await self.child.stdout.receive(1 << 20)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._frames.extend(self._splitter.finish())
                break
            self._frames.extend(self._splitter.feed(chunk))
        return self._frames.popleft() if self._frames else None

    async def _interrupt(self, request_id: int, decoder: Decoder) -> bool:
        """Stop the running call: SIGINT lets the tool unwind (its finally blocks run), then the
        worker kills the call's processes and answers; whether it did, and so is kept. A worker
        that does not answer in time is killed with its process group."""
        with anyio.CancelScope(shield=True):
            if self.alive:
                self.child.interrupt()
                with anyio.move_on_after(INTERRUPT_GRACE):
                    while True:
                        frame = await self._next_frame()
                        if frame is None or isinstance(frame, LineTooLong):
                            break
                        with suppress(RecursionError):
                            reply = await _decode(decoder, frame)
                            if reply is not None and reply.id == request_id:
                                self._idle_since = time.monotonic()
                                return self.reusable
            self.kill()
            await self.child.wait_exit(KILL_WAIT)
        return False

    async def _ended(self, what: str) -> ToolFailure:
        """The failure for a worker that exited mid-call."""
        self.reusable = False
        with anyio.CancelScope(shield=True):
            await self.child.wait_exit(STOP_GRACE)
            self.child.kill()  # the tool's children, or a worker gone astray
            if self.child.stderr is not None:
                await self.child.stderr.settle(STOP_GRACE)
        if self.child.stopped:
            return ToolFailure("cancelled", f"{what} was stopped: the toolset's workers were shut down")
        tail = self.child.stderr_text()
        message = f"{what} crashed its worker, which {exit_reason(self.child.returncode)}; " \
                  "the next call starts a new worker"
        if tail:
            message += f"\nLast lines of its stderr:\n{tail}"
        return ToolFailure("crashed", message, stderr_tail=tail or None)

    def _failure(self, error: WireError, what: str) -> ToolFailure:
        data = error.data or {}
        kind = data.get("kind")
        if kind not in _WORKER_KINDS:
            # A protocol error: our bug, not the tool's. Do not trust this worker again.
            self.reusable = False
            return ToolFailure("crashed", f"{what}: the worker refused the request: {error.message}")
        return ToolFailure(kind, error.message, path=data.get("path"), traceback=data.get("traceback"),
                           limit=data.get("limit"))


class _TooDeep:
    """An answer to our request, nested deeper than this process can decode."""


_TOO_DEEP = _TooDeep()
_HEAD_ID = re.compile(rb'\{"jsonrpc":"2\.0","id":(\d+),')


def _head_id(line: Line) -> int | None:
    m = _HEAD_ID.match(line)
    return int(m[1]) if m else None


async def _decode(decoder: Decoder, line: Line) -> Reply | CallReply | None:
    """The reply on one line, or None when the line is not a JSON-RPC reply.

    Raises:
        RecursionError: the line nests deeper than the decoder can follow (a ``Raw`` value is
            checked to the same depth as a built one).
    """
    try:
        if len(line) > _DECODE_IN_THREAD:
            return await anyio.to_thread.run_sync(decoder.decode, line)
        return decoder.decode(line)
    except msgspec.DecodeError:
        return None


async def decode_result(raw: msgspec.Raw) -> Any:
    """The value of a result ``call(raw=True)`` returned (the worker's reply was already checked
    to be JSON, nested no deeper than a decoder follows)."""
    if len(raw) > _DECODE_IN_THREAD:
        # msgspec holds the GIL while it decodes, so the thread spares the loop only the queueing
        # around it; what it buys is that nothing else on the loop waits in line behind it.
        return await anyio.to_thread.run_sync(_decode_value, raw)
    return _decode_value(raw)


_decode_value = msgspec.json.Decoder().decode


async def stop_all(workers: list[Worker]) -> None:
    async with anyio.create_task_group() as tg:
        for worker in workers:
            tg.start_soon(worker.stop)
