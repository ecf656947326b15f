"""The built-in tools' runner: in the sidecar, on the chat's workspace folder."""

from __future__ import annotations

from typing import Any

from ....sandbox.policy import DEFAULT
from ....sandbox.runner import Sandbox
from ...resolved import BuiltinConfig, Resolved
from ...runner import Run, ToolFailed, ToolRunner
from . import BUILTINS, BuiltinCall, BuiltinError


class BuiltinRunner(ToolRunner):
    def __init__(self, sandbox: Sandbox, default_timeout: float) -> None:
        self.sandbox = sandbox  # enforces what run_command's processes may do
        self.default_timeout = default_timeout  # seconds, for a tool whose config names none

    async def run(self, target: Resolved, call: Run) -> Any:
        config = target.config
        assert isinstance(config, BuiltinConfig) and call.workspace is not None  # (built-ins need a chat)
        try:
            return await BUILTINS[target.tool.id].run(BuiltinCall(
                call.workspace, call.args, config.timeout or self.default_timeout, config.confinement or DEFAULT,
                sandbox=self.sandbox))
        except BuiltinError as exc:
            raise ToolFailed(exc.message, exc.kind, exc.result) from None
