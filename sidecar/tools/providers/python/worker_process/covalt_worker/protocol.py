"""What the worker and the host say to each other, and what a call's child says to the worker."""

from __future__ import annotations

import struct
from typing import Any

import msgspec

PARSE_ERROR = -32700
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
TOOL_ERROR = -32000

KINDS = frozenset({"arguments", "raised", "limit", "load", "output", "cancelled", "crashed", "protocol"})
TRAILER = struct.Struct("<Q")  # the length of a call's answer, after it on the result pipe


class Config(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    toolset_id: str
    toolset_dir: str
    sdk_dir: str
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 30
    max_processes: int = 64
    output_bytes: int = 16 << 20
    idle_seconds: float = 300.0
    parent_pid: int | None = None  # the sidecar, when the worker must arm its parent-death signal itself
    cgroup: CgroupConfig | None = None  # made by the host for this worker's calls (sandbox/cgroups.py)


class CgroupConfig(msgspec.Struct):
    version: int  # 1: one folder per controller ("pids", "memory"); 2: one folder ("unified")
    dirs: dict[str, str]
    fixed: bool = False  # the host set the limits (in a sandbox only cgroup.procs is writable)
    limited: bool = True  # False: no limit files (controllers not enabled), each call gets rlimits


class CallLimits(msgspec.Struct, rename="camel"):
    memory_bytes: int = 256 << 20
    max_processes: int = 64
    disk_bytes: int = 1 << 30


class CallHead(msgspec.Struct, rename="camel"):
    """What the zygote reads of a call: the child decodes the rest."""

    entrypoint: str
    context: CallContextHead
    limits: CallLimits = msgspec.field(default_factory=CallLimits)


class CallContextHead(msgspec.Struct):
    workspace: str


class ChildAnswer(msgspec.Struct, forbid_unknown_fields=True):
    result: msgspec.Raw = msgspec.Raw(b"")  # empty when absent (msgspec takes no Raw | None)
    error: ChildError | None = None


class ChildError(msgspec.Struct, forbid_unknown_fields=True):
    code: int
    message: str
    data: dict[str, Any]


class Request(msgspec.Struct):
    method: str
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"{}")


class DescribeParams(msgspec.Struct):
    tools: dict[str, str]


class CallContext(msgspec.Struct, rename="camel"):
    workspace: str
    chat_id: str | None = None
    tool_call_id: str | None = None
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    telemetry: dict[str, Any] = msgspec.field(default_factory=dict)


class CallParams(msgspec.Struct, rename="camel"):
    tool: str
    entrypoint: str
    context: CallContext
    args: Any = msgspec.field(default_factory=dict)
    input_schema: dict[str, Any] | None = None
    limits: CallLimits = msgspec.field(default_factory=CallLimits)


class Failure(Exception):
    """A call that failed; becomes the JSON-RPC error of its request."""

    def __init__(self, kind: str, message: str, code: int = TOOL_ERROR, **data: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = {"kind": kind, **data}


def decode_params(raw: msgspec.Raw | bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as exc:
        raise Failure("protocol", f"invalid params: {exc}", INVALID_PARAMS) from None


def framed(data: bytearray) -> bool:
    """Whether ``data`` ends in a length that fits it: a whole answer, unless it was forged."""
    if len(data) < TRAILER.size:
        return False
    (size,) = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    return size <= len(data) - TRAILER.size


def unframe(data: bytearray) -> ChildAnswer | None:
    """The answer at the end of what a call's child sent (None when it sent nothing).

    Raises:
        msgspec.DecodeError: not an answer followed by its length.
    """
    if not data:
        return None
    if len(data) < TRAILER.size:
        raise msgspec.DecodeError("too short")
    (size,) = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    start = len(data) - TRAILER.size - size
    if start < 0:
        raise msgspec.DecodeError("bad length")
    return msgspec.json.decode(memoryview(data)[start:len(data) - TRAILER.size], type=ChildAnswer)
