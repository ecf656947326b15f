#!/usr/bin/env python3
"""Regenerate tools59.json.gz: the tools the seven MCP servers people install first list, plus the
sidecar's built-in tools, as each one answers ``tools/list`` (name, description, inputSchema).

    .venv/bin/python scripts/data/tool_selection/collect.py

Needs npx and uvx on PATH and the npm and PyPI registries: each server is installed and started
the way a user's MCP config starts it, then listed with the ``mcp`` SDK's stdio client. The
built-ins come from ``tools/list`` of the real ``python -m sidecar``. Versions are pinned below so
that a rerun gives the same file; bump them on purpose.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

OUT = HERE / "tools59.json.gz"

# server id -> (command, args): what a user's mcpServers entry says, with the version pinned.
SERVERS: dict[str, tuple[str, list[str]]] = {
    "everything": ("npx", ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]),
    "filesystem": ("npx", ["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "{tmp}"]),
    "memory": ("npx", ["-y", "@modelcontextprotocol/server-memory@2026.8.31"]),
    "sequential-thinking": ("npx", ["-y", "@modelcontextprotocol/server-sequential-thinking@2026.8.31"]),
    "fetch": ("uvx", ["mcp-server-fetch==2026.10.24"]),
    "git": ("uvx", ["mcp-server-git==2026.10.19"]),
    "time": ("uvx", ["mcp-server-time==2026.10.19"]),
}


async def list_server(command: str, args: list[str], tmp: str) -> list[dict[str, Any]]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # The whole environment, not the SDK's short default list: behind a proxy or a company CA, npx
    # and uvx need theirs (UV_SYSTEM_CERTS=1 makes uv trust the system's certificate store).
    env = {"UV_SYSTEM_CERTS": "1", **os.environ}
    params = StdioServerParameters(command=command, args=[a.replace("{tmp}", tmp) for a in args], env=env)
    # Declared as the sidecar's MCP host declares it (elicitation, no sampling or roots): the
    # everything server lists its elicitation tools only to a client that can answer them.
    async with stdio_client(params) as (read, write), ClientSession(
            read, write, elicitation_callback=_never_called) as session:
        await session.initialize()
        listed = await session.list_tools()
    return [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
            for t in listed.tools]


async def _never_called(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("listing tools calls none")


async def list_builtins(tmp: Path) -> list[dict[str, Any]]:
    from sidecar.client import SidecarClient

    tools: list[dict[str, Any]] = []
    async with SidecarClient.spawn(tmp / "data", client_name="collect") as client:
        params: dict[str, Any] = {"toolsetIds": ["builtin"], "pageSize": 500}
        while True:
            page = await client.request("tools/list", params)
            tools += page["tools"]
            if not page.get("nextPageToken"):
                break
            params["pageToken"] = page["nextPageToken"]
    return [{"name": t["id"], "description": t.get("description") or "", "inputSchema": t.get("inputSchema") or {}}
            for t in tools]


async def main() -> None:
    servers: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="collect-") as tmp:
        for sid, (command, args) in SERVERS.items():
            tools = await list_server(command, args, tmp)
            print(f"{sid:22} {len(tools):3} tools", file=sys.stderr)
            servers.append({"server": sid, "source": " ".join([command, *args]).replace(" {tmp}", ""),
                            "tools": tools})
        builtins = await list_builtins(Path(tmp))
    print(f"{'builtin':22} {len(builtins):3} tools", file=sys.stderr)
    servers.append({"server": "builtin", "source": "python -m sidecar: tools/list", "tools": builtins})
    total = sum(len(s["tools"]) for s in servers)
    print(f"total {total} tools -> {OUT}", file=sys.stderr)
    data = json.dumps({"servers": servers}, indent=1, ensure_ascii=False, sort_keys=True).encode()
    OUT.write_bytes(gzip.compress(data, mtime=0))


if __name__ == "__main__":
    anyio.run(main)
