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


class DebugInfo(Model):
    pid: int
    version: str
    python: str
    data_dir: str
    uptime_ms: int
    rss_bytes: int
    inflight_requests: int
    # Heavy optional modules already imported: start-up must not pay for them.
    heavy_modules_loaded: list[str]
    # The kill switch (settings toolsEnabled) and how many tool runs it would stop now.
    tools_enabled: bool
    tools_running: int
    # Database write transactions committed since start (benchmarks count what a turn costs).
    db_transactions: int = 0
    # Where secrets are kept ("keystore" | "file"); absent while none was ever stored in this data
    # directory (the choice is made with the first one).
    secrets_backend: str | None = None
    # Why the keystore cannot be used right now, when it cannot.
    secrets_error: str | None = None
    # Objects the garbage collector no longer walks: what was alive once the services started and
    # once the MCP SDK loaded (they live as long as the process), so a full collection never holds
    # the event loop for the whole heap. 0 when the app runs inside another program (tests).
    frozen_objects: int = 0
    sandbox: Annotated[SandboxInfo | None, msgspec.Meta(
        description="Which sandbox confines tool processes, what enforces their limits, and a warning when "
                    "they run unconfined.")] = None
    relevance_model: Annotated[RelevanceModelInfo | None, msgspec.Meta(
        description="The tool relevance model: loaded or not, its file, dimension, and why tools rank by "
                    "words only when they do.")] = None


class SleepParams(Model):
    ms: int
    work_done_token: int | str | None = None


class SleepResult(Model):
    slept_ms: int


class RaiseParams(Model):
    message: str = "debug/raise was called"


class RoundTripParams(Model):
    method: str
    params: dict[str, Any] = {}


class RoundTripResult(Model):
    result: Any


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
