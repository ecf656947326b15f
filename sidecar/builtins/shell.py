"""run_command: a shell command in the chat's workspace, asked for first, stopped at its timeout.

The command runs in its own process group with a scrubbed environment, so the sidecar's secrets
stay out of it and everything it starts is stopped with it. Output is kept up to a cap (its start
and its end), since a model needs the error at the bottom more than the middle of a long log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import anyio
from anyio.abc import Process

from . import Builtin, BuiltinCall, BuiltinError

OUTPUT_LIMIT = 128 << 10
MAX_TIMEOUT = 600.0


class _Output:
    def __init__(self, limit: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.limit = limit

    def add(self, chunk: bytes) -> None:
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.limit // 2
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        middle = f"\n… {self.dropped} bytes of output left out …\n".encode() if self.dropped else b""
        return (bytes(self.head) + middle + bytes(self.tail)).decode("utf-8", "replace")


async def run_command(call: BuiltinCall) -> dict[str, Any]:
    from ..runtime.environment import scrubbed_env

    command: str = call.args["command"]
    timeout = min(float(call.args.get("timeout") or call.timeout), MAX_TIMEOUT)
    output = _Output(OUTPUT_LIMIT)
    proc = await anyio.open_process(
        ["/bin/sh", "-c", command] if sys.platform != "win32" else ["cmd", "/c", command],
        cwd=call.workspace, env=scrubbed_env(), stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group: everything it starts is stopped with it
    )
    result: dict[str, Any] = {"command": command, "exit_code": None, "output": ""}
    try:
        with anyio.fail_after(timeout):
            await _collect(proc, output)
            result["exit_code"] = await proc.wait()
    except TimeoutError:
        result["output"] = output.text()
        raise BuiltinError(f"the command did not finish within {timeout:g} s and was stopped", result,
                           "timeout") from None
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_group(proc)
    result["output"] = output.text()
    if result["exit_code"] < 0:
        result["signal"] = signal.Signals(-result["exit_code"]).name
    return result


async def _collect(proc: Process, output: _Output) -> None:
    assert proc.stdout is not None
    drained = anyio.Event()
    async with anyio.create_task_group() as tg:
        async def read() -> None:
            async for chunk in proc.stdout:  # type: ignore[union-attr]
                output.add(chunk)
            drained.set()

        tg.start_soon(read)
        await proc.wait()
        # A background child may hold the pipe open after the shell exits: take what is already
        # there, then stop waiting for it.
        with anyio.move_on_after(0.05):
            await drained.wait()
        tg.cancel_scope.cancel()


async def _stop_group(proc: Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    await proc.aclose()


TOOLS = (
    Builtin(
        "run_command", "Run Command",
        "Run a shell command in the chat's workspace folder and return its exit code and output "
        "(stdout and stderr together). Asks the user first.",
        {"type": "object", "properties": {
            "command": {"type": "string", "minLength": 1, "description": "The command line, run by /bin/sh"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT,
                        "description": "Seconds before the command is stopped (default 60)"},
        }, "required": ["command"], "additionalProperties": False},
        run_command, "code", {"content": "$return.output", "language": "shell"},
        requires_confirmation=True,
    ),
)
