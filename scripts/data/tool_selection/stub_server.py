"""An MCP server (stdio) that lists the real tool definitions of one server of the bench's corpus,
verbatim (name, description, inputSchema), and answers every call with a short text:

    stub_server.py FILE SERVER     FILE: tools59.json.gz or catalog3000.json.gz (or a .json of that shape)

So the sidecar loads MCP tools exactly as their servers list them, in a few milliseconds and
without the network, for scripts/bench_tool_selection.py."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def definitions(path: Path, server: str) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    for s in [*data["servers"], data.get("extra") or {}]:
        if s.get("server") == server:
            return s["tools"]
    raise SystemExit(f"no server {server!r} in {path}")


def main() -> None:
    tools = [types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
             for t in definitions(Path(sys.argv[1]), sys.argv[2])]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])

    server = Server(f"stub-{sys.argv[2]}", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
