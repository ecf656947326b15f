"""Lifecycle: initialize, ping, shutdown, exit, cancellation and progress."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode

PROTOCOL_VERSION = "2026-11-22"


class ClientInfo(Model):
    name: str
    version: str = ""


class InitializeParams(Model):
    client_info: ClientInfo | None = None
    # The client's pid: when given, the sidecar shuts down once that process is gone, as with
    # --parent-pid.
    process_id: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)] | None = None
    # What the client can do; free-form so new UIs can announce features old sidecars ignore.
    capabilities: dict[str, Any] = {}


class ServerInfo(Model):
    name: str
    version: str


class ServerCapabilities(Model):
    max_line_bytes: int
    cancellation: list[str]
    tools_enabled: Annotated[bool, msgspec.Meta(
        description="The user's kill switch as stored (settings/get toolsEnabled): false while every tool is "
                    "switched off. Changes later come as settings/changed.")]
    progress: bool = True
    server_requests: list[str] = []
    experimental: dict[str, Any] = {}
    secrets_backend: Annotated[Literal["keystore", "file"] | None, msgspec.Meta(
        description="Where this data directory keeps secrets (see secrets/list): 'keystore' or 'file'; "
                    "absent while the choice is not made yet (no secret was ever stored here and no backend "
                    "is forced: the first secrets/set or secrets/list makes it).")] = None
    sandbox: Annotated[SandboxCapability | None, msgspec.Meta(
        description="Which sandbox confines tool processes (Python workers, run_command, opted-in stdio MCP "
                    "servers); see debug/info sandbox for the details.")] = None


class SandboxCapability(Model):
    mechanism: Annotated[Literal["bubblewrap", "landlock", "seatbelt", "none"], msgspec.Meta(
        description="What confines tool processes: 'bubblewrap', 'landlock', 'seatbelt' or 'none' (unconfined; "
                    "debug/info sandbox.warning says why).")]
    confined: Annotated[bool, msgspec.Meta(
        description="Whether tools run confined by the operating system; false deserves a visible warning.")]


class SandboxChangedParams(Model):
    sandbox: Annotated[SandboxCapability, msgspec.Meta(
        description="What confines tool processes now, as the probe found it (replaces capabilities.sandbox).")]
    warning: Annotated[str | None, msgspec.Meta(
        description="What is not confined and why, worded for the user (as debug/info sandbox.warning); "
                    "absent when fully confined.")] = None


class InitializeResult(Model):
    protocol_version: str
    server_info: ServerInfo
    capabilities: ServerCapabilities
    data_dir: str


class CancelParams(Model):
    id: int | str


class ProgressValue(Model):
    kind: Literal["begin", "report", "end"]
    message: str | None = None
    percentage: int | None = None
    title: str | None = None


class ProgressParams(Model):
    token: int | str
    value: ProgressValue


# The server-to-client requests of the whole contract, which ``initialize`` lists. Written out so
# the first answer needs no other API module; tests/test_protocol.py keeps it equal to api.specs.
SERVER_REQUESTS = ("ui/confirmToolCall", "ui/elicit", "ui/openUrl")

SPECS = (
    MethodSpec(
        "initialize", "clientToServer", "request",
        "First request of a session: exchange capabilities. Every other request before it fails "
        "with ServerNotInitialized.",
        params=InitializeParams, result=InitializeResult, inline=True,
        errors=(ErrorCode.CONFLICT, ErrorCode.INSTANCE_LOCKED, ErrorCode.STORAGE_ERROR),
    ),
    MethodSpec("ping", "clientToServer", "request", "Liveness check; answers {}.",
               result=Empty, inline=True),
    MethodSpec(
        "shutdown", "clientToServer", "request",
        "Stop taking requests, cancel and answer in-flight work, stop MCP servers, close the "
        "database. Then send exit.",
        result=None,
    ),
    MethodSpec("exit", "clientToServer", "notification",
               "Exit the process: code 0 after shutdown, 1 without it.", inline=True),
    MethodSpec(
        "$/cancelRequest", "both", "notification",
        "Cancel a request by id. Interrupt-mode requests answer RequestCancelled; signal-mode "
        "requests (chat turns) wind down and return their normal result. Unknown ids are ignored.",
        params=CancelParams, inline=True,
    ),
    MethodSpec("$/progress", "serverToClient", "notification",
               "Progress of a long request that was given a workDoneToken.", params=ProgressParams),
    MethodSpec("sandbox/changed", "serverToClient", "notification",
               "What confines tool processes is not what initialize reported in capabilities.sandbox. initialize "
               "answers from the last start's probe while nothing that decides it has changed, and the sidecar "
               "probes again right after the answer (tools always wait for that probe); this is sent when the "
               "new probe disagrees, e.g. the bubblewrap package or a kernel setting changed in a way the "
               "sidecar could not see.", params=SandboxChangedParams),
)
