"""Where tools run: built-in tools in the sidecar (builtin/), Python toolset tools in worker processes
(python/), and MCP servers' tools (mcp.py)."""
