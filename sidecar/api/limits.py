"""Seed 004's sandbox settings on the wire: what a tool process may do (time, memory, processes,
disk, network, writable folders), per toolset and per tool, set by the manifest and by the user."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode

Network = Literal["none", "allowedHosts", "full"]
LimitSource = Literal["default", "manifest", "user"]

_SIZE = ("Bytes, or a number with k, m or g as toolset.yaml writes it (\"512m\", \"1g\")")


class ConstraintsSettings(Model):
    """Seed 004's ``constraints`` block. In a change: absent keeps the value set, null removes it."""

    timeout_seconds: Annotated[float | None | msgspec.UnsetType, msgspec.Meta(description=(
        "Wall time one call may take, in seconds (more than 0, at most 3600; default 9). A call past it is "
        "killed and fails with errorKind timeout."))] = msgspec.UNSET


class SandboxSettings(Model):
    """Seed 004's ``sandbox`` block. In a change: absent keeps the value set, null removes it."""

    memory: Annotated[int | str | None | msgspec.UnsetType, msgspec.Meta(description=(
        f"Memory one call's processes may use together. {_SIZE}; 32m to 64g, default 256m."))] = msgspec.UNSET
    network: Annotated[Network | None | msgspec.UnsetType, msgspec.Meta(description=(
        "none (the default: no connection at all), allowedHosts (only the hosts in allowedHosts) or full "
        "(any host, the local network included)."))] = msgspec.UNSET
    allowed_hosts: Annotated[list[str] | None | msgspec.UnsetType, msgspec.Meta(description=(
        "With network allowedHosts: the hosts the tool may reach ('api.example.com', 'api.example.com:443', "
        "'*.example.com' for its subdomains). Listing hosts without a network means allowedHosts."))] = msgspec.UNSET
    writable: Annotated[list[str] | None | msgspec.UnsetType, msgspec.Meta(description=(
        "Absolute folders the tool may write besides its chat's workspace (which it always may). Refused: "
        "relative paths, '/', the whole home folder, and the app's data directory or a folder holding "
        "it."))] = msgspec.UNSET
    processes: Annotated[int | None | msgspec.UnsetType, msgspec.Meta(description=(
        "Processes and threads the call may run at once (1-4096, default 64)."))] = msgspec.UNSET
    disk: Annotated[int | str | None | msgspec.UnsetType, msgspec.Meta(description=(
        f"What one call may add to its workspace. {_SIZE}; default 1g."))] = msgspec.UNSET


class LimitLayer(Model):
    """One layer of settings as stored: only what it sets (sizes in bytes)."""

    constraints: Annotated[ConstraintsSettings | None, msgspec.Meta(
        description="The constraints this layer sets; absent: none.")] = None
    sandbox: Annotated[SandboxSettings | None, msgspec.Meta(
        description="The sandbox settings this layer sets (memory and disk in bytes); absent: none.")] = None


class LimitWarning(Model):
    """Something a tool may do beyond seed 004's defaults, worded for the user before install."""

    setting: Annotated[str, msgspec.Meta(description=(
        "The setting that allows it: sandbox.network, sandbox.writable, sandbox.memory, sandbox.processes "
        "or constraints.timeout_seconds."))]
    message: Annotated[str, msgspec.Meta(description="What the tool gains, e.g. 'may connect to any host ...'.")]
    tool_id: Annotated[str | None, msgspec.Meta(description="The tool it concerns (toolset:tool).")] = None
    server: Annotated[str | None, msgspec.Meta(description=(
        "The sandboxed stdio MCP server it concerns (its id in the toolset), for a server's "
        "mcp_servers[].sandbox."))] = None


class ToolLimits(Model):
    """The limits a tool's calls run under, every layer applied: seed 004's defaults, the manifest's
    for the toolset then for the tool, the user's for the toolset then for the tool (the later wins)."""

    timeout_seconds: Annotated[float, msgspec.Meta(description="Wall time of one call, in seconds.")]
    memory_bytes: Annotated[int, msgspec.Meta(description="Memory of one call's processes together.")]
    max_processes: Annotated[int, msgspec.Meta(description="Processes and threads at once.")]
    disk_bytes: Annotated[int, msgspec.Meta(description="What one call may add to its workspace.")]
    network: Annotated[Network, msgspec.Meta(description="none, allowedHosts or full.")]
    allowed_hosts: Annotated[list[str], msgspec.Meta(description="With network allowedHosts: the hosts.")] = []
    writable: Annotated[list[str], msgspec.Meta(description=(
        "Folders writable besides the chat's workspace."))] = []
    sources: Annotated[dict[str, LimitSource], msgspec.Meta(description=(
        "Where each value came from, by the field's name here (timeoutSeconds, memoryBytes, maxProcesses, "
        "diskBytes, network, allowedHosts, writable): default, manifest or user."))] = {}
    warnings: Annotated[list[LimitWarning], msgspec.Meta(description=(
        "What these limits allow beyond the defaults; and, where this system's sandbox cannot enforce a "
        "setting as written, what the tool gets instead (under Landlock, sandbox.network allowedHosts "
        "means no network at all: Landlock filters TCP by port, not by address)."))] = []


class ToolsetLimitsParams(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset.")]


class SetToolsetLimitsParams(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset.")]
    constraints: Annotated[ConstraintsSettings | None | msgspec.UnsetType, msgspec.Meta(description=(
        "Changes to the user's constraints for every tool of the toolset; null removes them all."))] = msgspec.UNSET
    sandbox: Annotated[SandboxSettings | None | msgspec.UnsetType, msgspec.Meta(description=(
        "Changes to the user's sandbox settings for every tool of the toolset; null removes them all."))] = (
        msgspec.UNSET)


class ToolsetLimits(Model):
    toolset_id: Annotated[str, msgspec.Meta(description="The toolset.")]
    manifest: Annotated[LimitLayer | None, msgspec.Meta(description=(
        "What its toolset.yaml sets for the whole toolset; absent: nothing."))] = None
    user: Annotated[LimitLayer | None, msgspec.Meta(description=(
        "What the user set for the whole toolset (wins over the manifest; a tool's own settings win over "
        "both); absent: nothing."))] = None
    warnings: Annotated[list[LimitWarning], msgspec.Meta(description=(
        "What its tools may do beyond the defaults now, tool by tool."))] = []


_NF, _IP, _CF, _ST = ErrorCode.NOT_FOUND, ErrorCode.INVALID_PARAMS, ErrorCode.CONFLICT, ErrorCode.STORAGE_ERROR

SPECS = (
    MethodSpec("toolsets/getLimits", "clientToServer", "request",
               "The sandbox settings of a whole toolset: its manifest's and the user's (tools/get shows each "
               "tool's effective limits).",
               params=ToolsetLimitsParams, result=ToolsetLimits, errors=(_NF, _ST)),
    MethodSpec("toolsets/setLimits", "clientToServer", "request",
               "Change the user's sandbox settings for every tool of a toolset (seed 004's constraints and "
               "sandbox; a tool's own, tools/setOverride, win over them); kept across upgrades. InvalidParams "
               "names the setting and the forms it takes; Conflict while the toolset is disabled or deleted.",
               params=SetToolsetLimitsParams, result=ToolsetLimits, errors=(_NF, _IP, _CF, _ST)),
)
