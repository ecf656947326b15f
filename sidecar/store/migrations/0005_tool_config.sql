-- Per-tool configuration (seed 004). A toolset's config_schema holds the fields shared by all its
-- tools; a tool's own fields live in its tools.config JSON.
ALTER TABLE toolsets ADD COLUMN config_schema TEXT NOT NULL DEFAULT '{}';

-- The values the user set, by toolset, scope (the tool's id inside the toolset, or '*' for a
-- toolset-level field) and key. A secret field's value lives in the secret store only: its row
-- says that one is set, and the CHECK keeps any value of it out of this file.
CREATE TABLE tool_config (
    toolset_id TEXT NOT NULL REFERENCES toolsets(id) ON DELETE CASCADE,
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT, -- JSON
    secret     INTEGER NOT NULL DEFAULT 0 CHECK (secret IN (0, 1)),
    updated_at TEXT NOT NULL,
    CHECK (secret = 0 OR value IS NULL),
    CHECK (secret = 1 OR value IS NOT NULL),
    PRIMARY KEY (toolset_id, scope, key)
) WITHOUT ROWID;
