"""Where tools come from besides the stored catalog: MCP servers (discovered live)."""
