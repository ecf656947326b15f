"""Lifecycle: initialize, ping, shutdown, exit, cancellation and progress."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode

PROTOCOL_VERSION = "2026-11-22"


class ClientInfo(Model):
    name: Annotated[str, msgspec.Meta(description="The client application's name, for logs.")]
    version: Annotated[str, msgspec.Meta(description="Its version; empty when not given.")] = ""


class InitializeParams(Model):
    client_info: Annotated[ClientInfo | None, msgspec.Meta(
        description="Who the client is; absent: unnamed.")] = None
    process_id: Annotated[Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)] | None, msgspec.Meta(
        description="The client's process id (1 to 2^31-1): the sidecar exits (code 0) once that process is "
                    "gone, as with --parent-pid. Absent, null or the sidecar's own pid: not watched.")] = None
    # Free-form so new UIs can announce features old sidecars ignore.
    capabilities: Annotated[dict[str, Any], msgspec.Meta(
        description="What the client can do, free-form; the sidecar reads none of it today.")] = {}


class ServerInfo(Model):
    name: Annotated[str, msgspec.Meta(description="Always 'covalt-sidecar'.")]
    version: Annotated[str, msgspec.Meta(description="The sidecar's version (as debug/info version).")]


class ServerCapabilities(Model):
    max_line_bytes: Annotated[int, msgspec.Meta(
        description="The longest message line the sidecar reads, in bytes (--max-line-bytes; 64 MiB by "
                    "default); a longer one is skipped and answered with InvalidRequest (id null).")]
    cancellation: Annotated[list[str], msgspec.Meta(
        description="How requests are cancelled: always ['$/cancelRequest'].")]
    tools_enabled: Annotated[bool, msgspec.Meta(
        description="The user's kill switch as stored (settings/get toolsEnabled): false while every tool is "
                    "switched off. Changes later come as settings/changed.")]
    progress: Annotated[bool, msgspec.Meta(
        description="Whether requests given a workDoneToken report $/progress. Always true, so never on the "
                    "wire (defaults are left out): absent means true.")] = True
    server_requests: Annotated[list[str], msgspec.Meta(
        description="Every server-to-client request the client must be ready to answer (ServerRequests in "
                    "protocol/ts), by method name.")] = []
    experimental: Annotated[dict[str, Any], msgspec.Meta(
        description="Features not in the contract yet, free-form; empty (so absent) today.")] = {}
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
    protocol_version: Annotated[str, msgspec.Meta(
        description="The contract's version, a date (YYYY-MM-DD): PROTOCOL_VERSION in protocol/ts.")]
    server_info: Annotated[ServerInfo, msgspec.Meta(description="The sidecar's name and version.")]
    capabilities: Annotated[ServerCapabilities, msgspec.Meta(description="What this sidecar offers.")]
    data_dir: Annotated[str, msgspec.Meta(
        description="The absolute path of the data directory this sidecar holds (--data-dir).")]


class CancelParams(Model):
    id: Annotated[int | str, msgspec.Meta(
        description="The id of the request to cancel, as it was sent; an unknown or finished one is ignored.")]


class ProgressValue(Model):
    kind: Annotated[Literal["begin", "report", "end"], msgspec.Meta(
        description="'begin' (first, with title), 'report' (any number) or 'end' (last). A tool's own "
                    "progress (tools/invoke) and a bundle download come as 'report' only.")]
    message: Annotated[str | None, msgspec.Meta(
        description="What is being done now, for the user; absent when there is nothing to add.")] = None
    percentage: Annotated[int | None, msgspec.Meta(
        description="How far the work is, 0 to 100; absent when the total is unknown, and on 'end'.")] = None
    title: Annotated[str | None, msgspec.Meta(
        description="'begin' only: what the work is, e.g. 'uploading'.")] = None


class ProgressParams(Model):
    token: Annotated[int | str, msgspec.Meta(
        description="The workDoneToken the client gave with the request this progress is for.")]
    value: Annotated[ProgressValue, msgspec.Meta(description="The progress itself.")]


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
