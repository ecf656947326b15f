-- Soft delete and tools whose provider went away (seed 002: never deleted automatically).
--   toolsets.soft_deleted_at: when toolsets/delete hid it (UTC); NULL while it is live. The reaper
--                              removes it for good once it has been deleted longer than the retention.
--   tools.unavailable_reason:  why a stored tool cannot run now (its module vanished on a reload, it
--                              left the manifest, a built-in that left the build); NULL when it can.
ALTER TABLE toolsets ADD COLUMN soft_deleted_at TEXT;
ALTER TABLE tools ADD COLUMN unavailable_reason TEXT;

-- The last definition each MCP server listed for each of its tools: MCP tools are discovered live,
-- so this is what is left to show of one its server stops listing while it still has an override
-- or past calls (vanished_at set); a vanished tool with neither is forgotten.
CREATE TABLE mcp_tools_seen (
    toolset_id  TEXT NOT NULL REFERENCES toolsets(id) ON DELETE CASCADE,
    server_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    definition  TEXT NOT NULL, -- JSON {title, description, inputSchema, outputSchema, annotations}
    seen_at     TEXT NOT NULL,
    vanished_at TEXT,
    PRIMARY KEY (toolset_id, server_id, name)
) WITHOUT ROWID;
