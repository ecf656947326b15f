"""Toolsets: bundles of tools from Python modules and MCP servers (toolset.yaml + ZIP)."""

from __future__ import annotations

from typing import Literal

from .base import MethodSpec, Model
from .errors import ErrorCode


class InspectParams(Model):
    # Absolute path of a .zip file or a folder holding toolset.yaml.
    path: str


class ManifestInfo(Model):
    id: str
    name: str
    version: str
    description: str
    manifest_version: str


class InspectedTool(Model):
    id: str  # the canonical id it would get: toolset:tool
    name: str
    description: str
    entrypoint: str
    requires_confirmation: bool
    renderer: str | None = None
    timeout: float | None = None


class InspectedServer(Model):
    id: str
    type: Literal["stdio", "sse", "streamable-http"]
    # What would run: the command and its arguments (secrets masked).
    command: list[str] | None = None
    url: str | None = None
    cwd: str | None = None
    env: dict[str, str] = {}
    headers: dict[str, str] = {}


class BundleFile(Model):
    path: str
    kind: Literal["python", "artifact", "asset", "config"]
    size: int


class InspectResult(Model):
    manifest: ManifestInfo
    source_type: Literal["zip", "local"]
    tools: list[InspectedTool]
    mcp_servers: list[InspectedServer]
    files: list[BundleFile]
    warnings: list[str]


SPECS = (
    MethodSpec(
        "toolsets/inspect", "clientToServer", "request",
        "Read a toolset bundle (ZIP or folder) and show what installing it would add, including "
        "the commands its MCP servers would run; installs and runs nothing.",
        params=InspectParams, result=InspectResult,
        errors=(ErrorCode.INVALID_BUNDLE, ErrorCode.INVALID_PARAMS),
    ),
)
