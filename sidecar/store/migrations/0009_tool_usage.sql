-- How often each tool ran and when it last did (seed 002 callCount / lastCalledAt), for every
-- provider: keyed by tool id, not a column of `tools`, because MCP tools are never rows there.
-- Written in the same transaction as the tool call records (store/tool_calls.py), so it never
-- disagrees with the audit trail it is counted from.
CREATE TABLE tool_usage (
    tool_id        TEXT PRIMARY KEY,
    call_count     INTEGER NOT NULL DEFAULT 0 CHECK (call_count >= 0),
    last_called_at TEXT
) WITHOUT ROWID;

-- Counted again from the records of calls that ran (a duration); tools.call_count, the older
-- counter of stored tools, also counted calls refused before they ran, so it only fills in
-- what the records cannot say (calls from before records had a duration).
INSERT INTO tool_usage (tool_id, call_count, last_called_at)
SELECT tool_id, count(*), max(started_at) FROM tool_calls WHERE duration_ms IS NOT NULL GROUP BY tool_id;
INSERT INTO tool_usage (tool_id, call_count, last_called_at)
SELECT tool_id, call_count, last_called_at FROM tools WHERE call_count > 0 AND true
ON CONFLICT (tool_id) DO UPDATE SET
    call_count = max(call_count, excluded.call_count),
    last_called_at = coalesce(max(last_called_at, excluded.last_called_at), last_called_at, excluded.last_called_at);

-- Keyset pages: chats/list walks (updated_at, id) newest first, toolsets/list (name, id).
DROP INDEX chats_by_update;
CREATE INDEX chats_by_update ON chats(updated_at, id);
CREATE INDEX toolsets_by_name ON toolsets(name, id);
