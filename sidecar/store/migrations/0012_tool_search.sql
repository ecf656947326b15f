-- The search index of the tool catalog (tools/search): one document per tool of every provider,
-- MCP tools included while their server lists them. Derived data: sidecar/tools/search.py keeps it
-- in line with the catalog (a diff on each change) and can rebuild it whole from an empty index.
CREATE TABLE tool_search_docs (
    doc INTEGER PRIMARY KEY,            -- the rowid of the tool's rows in both FTS tables
    tool_id TEXT NOT NULL UNIQUE,
    toolset_id TEXT NOT NULL,           -- 'builtin' for built-ins
    enabled INTEGER NOT NULL,
    modified_at TEXT NOT NULL DEFAULT '',
    call_count INTEGER NOT NULL DEFAULT 0,  -- tool_usage's, kept by the triggers below
    -- The indexed fields that can change while the id stays (slug and name follow from the id), to
    -- tell a changed document by comparing columns.
    display TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT ''
);
-- The empty query's order (recency, then usage) without a sort.
CREATE INDEX tool_search_recent ON tool_search_docs (modified_at DESC, call_count DESC, tool_id);

-- Whole words and word prefixes (unicode61: "read_file" and "web-search" are two words each;
-- diacritics folded, so "cafe" finds "café").
CREATE VIRTUAL TABLE tool_search_words USING fts5(
    slug, tool_id, name, display, description, tags,
    tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');

-- Any run of three or more characters, for the fuzzy tier ("arch" finds "web-search").
CREATE VIRTUAL TABLE tool_search_trigrams USING fts5(
    slug, tool_id, name, display, description, tags, tokenize = 'trigram');

-- The stored tools whose document may be stale: every write to a stored tool, its toolset or an
-- override marks them here (whichever code made it), and the next search indexes those again from
-- their views. ``seq`` moves on every mark, so a sync clears only the marks it read.
CREATE TABLE tool_search_dirty (tool_id TEXT PRIMARY KEY, seq INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
INSERT INTO tool_search_dirty (tool_id) SELECT tool_id FROM tools;

-- The toolsets with MCP servers whose tools' documents may be stale for a reason other than their
-- servers listing again (which the index sees in memory): an override, the toolset's own state
-- (enabled, deleted), a server row, or what a server last listed. Without these marks any catalog
-- write re-diffed every MCP tool (500 views: a third of a change's time to searchable).
CREATE TABLE tool_search_mcp_dirty (toolset_id TEXT PRIMARY KEY, seq INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;

CREATE TRIGGER tool_search_tool_added AFTER INSERT ON tools BEGIN
    INSERT INTO tool_search_dirty (tool_id) VALUES (NEW.tool_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_tool_changed AFTER UPDATE ON tools BEGIN
    INSERT INTO tool_search_dirty (tool_id) VALUES (OLD.tool_id), (NEW.tool_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_tool_removed AFTER DELETE ON tools BEGIN
    INSERT INTO tool_search_dirty (tool_id) VALUES (OLD.tool_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_toolset_changed AFTER UPDATE ON toolsets BEGIN
    INSERT INTO tool_search_dirty (tool_id) SELECT tool_id FROM tools WHERE toolset_id = NEW.id
    ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
-- An exact override marks its tool; a pattern (fs:*, *:read_*: a key with * or ?) every stored
-- tool of its toolset, since any of them may match it. (Marking the whole toolset for an exact
-- one re-indexed 50 tools to rename one: half of a change's time to searchable.)
CREATE TRIGGER tool_search_override_added AFTER INSERT ON tool_overrides BEGIN
    INSERT INTO tool_search_dirty (tool_id) SELECT tool_id FROM tools WHERE toolset_id = NEW.toolset_id
    AND (NEW.tool_id GLOB '*[*?]*' OR tool_id = NEW.tool_id)
    ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_override_changed AFTER UPDATE ON tool_overrides BEGIN
    INSERT INTO tool_search_dirty (tool_id) SELECT tool_id FROM tools WHERE toolset_id IN (OLD.toolset_id, NEW.toolset_id)
    AND (OLD.tool_id GLOB '*[*?]*' OR NEW.tool_id GLOB '*[*?]*' OR tool_id IN (OLD.tool_id, NEW.tool_id))
    ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_override_removed AFTER DELETE ON tool_overrides BEGIN
    INSERT INTO tool_search_dirty (tool_id) SELECT tool_id FROM tools WHERE toolset_id = OLD.toolset_id
    AND (OLD.tool_id GLOB '*[*?]*' OR tool_id = OLD.tool_id)
    ON CONFLICT DO UPDATE SET seq = seq + 1;
END;

-- Usage (every provider's, MCP tools included) follows tool_usage as calls are recorded.
CREATE TRIGGER tool_search_usage_added AFTER INSERT ON tool_usage BEGIN
    UPDATE tool_search_docs SET call_count = NEW.call_count WHERE tool_id = NEW.tool_id;
END;
CREATE TRIGGER tool_search_usage_changed AFTER UPDATE ON tool_usage BEGIN
    UPDATE tool_search_docs SET call_count = NEW.call_count WHERE tool_id = NEW.tool_id;
END;

-- MCP marks (tool_search_mcp_dirty above).
CREATE TRIGGER tool_search_mcp_override_added AFTER INSERT ON tool_overrides WHEN EXISTS (SELECT 1 FROM toolset_mcp_servers WHERE toolset_id = NEW.toolset_id) BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_override_changed AFTER UPDATE ON tool_overrides WHEN EXISTS (SELECT 1 FROM toolset_mcp_servers WHERE toolset_id = NEW.toolset_id) BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_override_removed AFTER DELETE ON tool_overrides WHEN EXISTS (SELECT 1 FROM toolset_mcp_servers WHERE toolset_id = OLD.toolset_id) BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (OLD.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_toolset_changed AFTER UPDATE ON toolsets WHEN EXISTS (SELECT 1 FROM toolset_mcp_servers WHERE toolset_id = NEW.id) BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_server_added AFTER INSERT ON toolset_mcp_servers BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_server_changed AFTER UPDATE ON toolset_mcp_servers BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_server_removed AFTER DELETE ON toolset_mcp_servers BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (OLD.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_seen_added AFTER INSERT ON mcp_tools_seen BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_seen_changed AFTER UPDATE ON mcp_tools_seen BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (NEW.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER tool_search_mcp_seen_removed AFTER DELETE ON mcp_tools_seen BEGIN
    INSERT INTO tool_search_mcp_dirty (toolset_id) VALUES (OLD.toolset_id) ON CONFLICT DO UPDATE SET seq = seq + 1;
END;
