"""run_command: a shell command in the chat's workspace, asked for first, stopped at its timeout.

The command runs in its own process group with a scrubbed environment, so the sidecar's secrets
stay out of it and everything it starts is stopped with it. Output is kept up to a cap (its start
and its end), since a model needs the error at the bottom more than the middle of a long log.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from ....children import DEVNULL, STDOUT, Child, scrubbed_env, signal_name
from ....sandbox.hints import hint
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
    command: str = call.args["command"]
    timeout = min(float(call.args.get("timeout") or call.timeout), MAX_TIMEOUT)
    output = _Output(OUTPUT_LIMIT)
    # In the sandbox, with the chat's workspace its only writable place; its own process group (its
    # own sandbox) so everything it starts is stopped with it.
    jail = await call.sandbox.prepare(
        ["/bin/sh", "-c", command] if sys.platform != "win32" else ["cmd", "/c", command],
        env=scrubbed_env(), cwd=str(call.workspace), workspace=str(call.workspace), confinement=call.confinement)
    child = await jail.spawn(label="run_command", stdin=DEVNULL, stderr=STDOUT)
    result: dict[str, Any] = {"command": command, "exit_code": None, "output": ""}
    try:
        with anyio.fail_after(timeout):
            await _collect(child, output)
            result["exit_code"] = await child.process.wait()
    except TimeoutError:
        result["output"] = output.text()
        raise BuiltinError(f"the command did not finish within {timeout:g} s and was stopped", result,
                           "timeout") from None
    finally:
        # No grace: a command past its time, or what it left running in the background, is killed.
        await child.stop(stdin_grace=0, term_grace=0)
    result["output"] = output.text()
    if result["exit_code"] != 0 and jail.mechanism != "none":
        said = hint(result["output"], call.confinement, str(call.workspace), jail.mechanism)
        if said:
            result["sandbox"] = said  # what the sandbox blocked, and which setting allows it
    if result["exit_code"] < 0:
        result["signal"] = signal_name(-result["exit_code"])
    return result


async def _collect(child: Child, output: _Output) -> None:
    stdout = child.stdout
    drained = anyio.Event()
    async with anyio.create_task_group() as tg:
        async def read() -> None:
            async for chunk in stdout:
                output.add(chunk)
            drained.set()

        tg.start_soon(read)
        await child.process.wait()
        # A background child may hold the pipe open after the shell exits: take what is already
        # there, then stop waiting for it.
        with anyio.move_on_after(0.05):
            await drained.wait()
        tg.cancel_scope.cancel()


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
