"""The Python tools' runner: each call goes to a warm worker of the tool's toolset (``workers.py``),
in the chat's workspace, or outside a chat in a scratch folder of its own (``scratch``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .... import secrets
from ....sandbox.policy import DEFAULT
from ...resolved import PythonConfig, Resolved
from ...runner import Run, ToolFailed, ToolRunner
from ...telemetry import telemetry
from .worker import ToolFailure
from .workers import WorkerHost


class PythonRunner(ToolRunner):
    scratch = True  # a worker's cwd: a folder the call may leave things in, dropped after it

    def __init__(self, workers: WorkerHost) -> None:
        self.workers = workers

    async def run(self, target: Resolved, call: Run) -> Any:
        tool, config = target.tool, target.config
        assert isinstance(config, PythonConfig) and tool.toolset_id is not None and target.toolset_dir is not None
        pool = self.workers.pool(tool.toolset_id, Path(target.toolset_dir))
        confinement = config.confinement or DEFAULT
        # Settings (secret values included) travel in the call's payload only: never in the
        # worker's environment or command line, which other processes can read.
        context = {"workspace": str(call.workspace), "chatId": call.chat_id, "toolsetId": tool.toolset_id,
                   "toolsetDir": target.toolset_dir, "toolCallId": call.call_id,
                   "settings": call.settings or {}, "telemetry": telemetry(call.client_context)}
        hidden = call.secret_values(target)
        scratch = call.workspace if call.chat_id is None else None
        try:
            # Seed 004's 9 s unless a layer (manifest or user, tools/limits.py) says otherwise.
            result = await pool.call(tool.id, config.entrypoint, call.args, context=context,
                                     input_schema=tool.input_schema, timeout=confinement.timeout_seconds,
                                     raw=call.raw, confinement=confinement,
                                     root=str(scratch.parent) if scratch is not None else None)
        except ToolFailure as exc:
            message = f"{exc.path}: {exc.message}" if exc.path else exc.message
            # A tool's error often quotes what it was given (an HTTP library's "Illegal header
            # value b'Bearer sk-...'"): a secret from its settings is masked in it.
            raise ToolFailed(secrets.scrub(message, hidden), exc.kind) from None
        return secrets.scrub_json(result, hidden)
