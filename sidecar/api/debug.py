"""Diagnostics for the UI's about page, the REPL, benchmarks and tests."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import MethodSpec, Model

SandboxMechanism = Literal["bubblewrap", "landlock", "seatbelt", "none"]


class SandboxInfo(Model):
    mechanism: Annotated[SandboxMechanism, msgspec.Meta(
        description="What confines tool processes (Python workers, run_command, opted-in stdio MCP servers): "
                    "'bubblewrap' (Linux namespaces: own filesystem view, process list and network), "
                    "'landlock' (Linux kernel rules on files, TCP and signals), 'seatbelt' (macOS sandbox-exec) "
                    "or 'none' (unconfined: rlimits only).")]
    confined: Annotated[bool, msgspec.Meta(
        description="Whether tools run confined (mechanism is not 'none').")]
    limits: Annotated[Literal["cgroup-v2", "cgroup-v1", "rlimit", "job-object"], msgspec.Meta(
        description="What enforces a tool's memory and process limits: a cgroup (v2 or v1) or rlimits on Linux "
                    "and macOS; 'job-object' on Windows, where each tool process and everything it starts is "
                    "in a Job Object with the memory and process limits, ended as a whole when its call ends "
                    "(mechanism stays 'none' there: files and network are not confined; see warning).")]
    landlock_abi: Annotated[int, msgspec.Meta(
        description="The kernel's Landlock ABI version (0: none); Landlock is the fallback below bubblewrap.")] = 0
    warning: Annotated[str | None, msgspec.Meta(
        description="What is not confined and why, worded for the user; absent when fully confined. Show it: "
                    "'none' means a tool can read and write whatever this user can.")] = None


class RelevanceModelInfo(Model):
    state: Annotated[Literal["notLoaded", "loading", "loaded", "unavailable"], msgspec.Meta(
        description="The sentence-embedding model that ranks tools by meaning (tools/relevant): notLoaded (it "
                    "loads at the first ranking, or a few seconds after start), loading, loaded, or unavailable "
                    "(tools rank by words only; reason says why).")]
    loaded: Annotated[bool, msgspec.Meta(description="Whether the model is loaded and ranks by meaning.")]
    path: Annotated[str | None, msgspec.Meta(
        description="The model file (ONNX) used or looked for; absent when switched off or not installed.")] = None
    tokenizer: Annotated[str | None, msgspec.Meta(description="Its tokenizer file (tokenizer.json).")] = None
    model_id: Annotated[str | None, msgspec.Meta(
        description="name@digest of the loaded file: what the cached embeddings are keyed by.")] = None
    dimension: Annotated[int | None, msgspec.Meta(description="The length of its vectors, once loaded.")] = None
    fallback_reason: Annotated[str | None, msgspec.Meta(
        description="Why tools rank by words only (missing or corrupt file, switched off); absent otherwise.")] = None
    embedded: Annotated[int, msgspec.Meta(
        description="Tool texts embedded since start (the others came from the cache in the database).")] = 0


class ChildEnvironmentInfo(Model):
    """The names (never the values) of this process's environment variables that reach child processes
    beyond the basics every child gets (PATH, HOME, USER, LANG, TZ, TMPDIR, LC_*...)."""

    tools: Annotated[list[str], msgspec.Meta(description=(
        "What Python toolset workers and run_command get: this machine's certificate and proxy settings "
        "(SSL_CERT_FILE, REQUESTS_CA_BUNDLE, HTTPS_PROXY...) that are set here, sorted."))]
    mcp_servers: Annotated[list[str], msgspec.Meta(description=(
        "What every stdio MCP server gets: those, and the package managers' settings (UV_*, npm_config_*, "
        "PIP_*, XDG_*...) that are set here, sorted. A server also gets its envPassthrough and its env "
        "(mcpServers/list's envNames)."))]


class DebugInfo(Model):
    pid: Annotated[int, msgspec.Meta(description="The sidecar's process id.")]
    version: Annotated[str, msgspec.Meta(description="The sidecar's version (as initialize serverInfo.version).")]
    python: Annotated[str, msgspec.Meta(description="The Python version running it, e.g. '3.12.7'.")]
    data_dir: Annotated[str, msgspec.Meta(description="The absolute path of the data directory.")]
    uptime_ms: Annotated[int, msgspec.Meta(description="Milliseconds since the sidecar started.")]
    rss_bytes: Annotated[int, msgspec.Meta(
        description="Resident memory in bytes (current on Linux; the peak where /proc is missing, e.g. macOS).")]
    inflight_requests: Annotated[int, msgspec.Meta(
        description="Client requests being handled now, this debug/info included.")]
    # Start-up must not pay for them: benchmarks and tests assert this list stays short.
    heavy_modules_loaded: Annotated[list[str], msgspec.Meta(
        description="Which heavy optional Python modules are imported already (numpy, onnxruntime, mcp, "
                    "openai, anthropic, httpx, ...).")]
    tools_enabled: Annotated[bool, msgspec.Meta(
        description="The kill switch (settings toolsEnabled): false while every tool is switched off.")]
    tools_running: Annotated[int, msgspec.Meta(
        description="Tool runs under way now: what switching tools off would stop.")]
    db_transactions: Annotated[int, msgspec.Meta(
        description="Database write transactions committed since start (benchmarks count what a turn "
                    "costs).")] = 0
    secrets_backend: Annotated[str | None, msgspec.Meta(
        description="Where secrets are kept: 'keystore' or 'file'; absent while the choice is not made (no "
                    "secret was ever stored in this data directory and none is forced).")] = None
    secrets_error: Annotated[str | None, msgspec.Meta(
        description="Why the last use of the operating system's keystore (or reading the secrets record) "
                    "failed, until one succeeds; absent otherwise.")] = None
    # Frozen: what was alive once the services started and once the MCP SDK loaded (they live as
    # long as the process), so a full collection never holds the event loop for the whole heap.
    frozen_objects: Annotated[int, msgspec.Meta(
        description="Objects the garbage collector no longer walks (frozen after start-up); 0 when the "
                    "sidecar runs inside another program (tests).")] = 0
    sandbox: Annotated[SandboxInfo | None, msgspec.Meta(
        description="Which sandbox confines tool processes, what enforces their limits, and a warning when "
                    "they run unconfined.")] = None
    child_environment: Annotated[ChildEnvironmentInfo | None, msgspec.Meta(
        description="Which of this process's environment variables reach tools and MCP servers, by name.")] = None
    relevance_model: Annotated[RelevanceModelInfo | None, msgspec.Meta(
        description="The tool relevance model: loaded or not, its file, dimension, and why tools rank by "
                    "words only when they do.")] = None


class SleepParams(Model):
    ms: Annotated[int, msgspec.Meta(
        description="How long to wait, in milliseconds: 0 to 3600000 (else InvalidParams).")]
    work_done_token: Annotated[int | str | None, msgspec.Meta(
        description="When given, $/progress under this token: 'begin', ten 'report's (10% steps), 'end'.")] = None


class SleepResult(Model):
    slept_ms: Annotated[int, msgspec.Meta(description="How long it actually waited, in milliseconds.")]


class RaiseParams(Model):
    message: Annotated[str, msgspec.Meta(
        description="The exception's message (it goes to the log, not into the InternalError answer).")] = (
        "debug/raise was called")


class RoundTripParams(Model):
    method: Annotated[str, msgspec.Meta(
        description="The server-to-client method to send; must start with 'ui/' (else InvalidParams).")]
    params: Annotated[dict[str, Any], msgspec.Meta(description="Its params, sent as given.")] = {}


class RoundTripResult(Model):
    result: Annotated[Any, msgspec.Meta(description="The client's answer (its result), as received.")]


SPECS = (
    MethodSpec("debug/info", "clientToServer", "request",
               "Process facts: pid, memory, uptime, which heavy modules are loaded.",
               result=DebugInfo, inline=True),
    MethodSpec("debug/sleep", "clientToServer", "request",
               "Wait ms milliseconds (reporting $/progress when given a workDoneToken); "
               "cancellable. For exercising cancellation and progress.",
               params=SleepParams, result=SleepResult),
    MethodSpec("debug/raise", "clientToServer", "request",
               "Raise an unexpected exception, to see InternalError and its errorId in the log.",
               params=RaiseParams, result=None),
    MethodSpec("debug/roundTrip", "clientToServer", "request",
               "Send a ui/ request to the client and return its answer, to exercise "
               "server-to-client requests.",
               params=RoundTripParams, result=RoundTripResult),
)
