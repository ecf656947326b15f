-- The audit trail (toolCalls/list, toolCalls/export): who started each call, how it was
-- confirmed, and what a filter needs that the tool itself may lose later (a toolset uninstalled,
-- an MCP server removed), kept on the record.
--   started_by:   model (a chat turn) | palette (chat/invokeTool) | api (tools/call) | schedule
--   schedule_id:  the schedule that ran it (started_by = 'schedule')
--   confirmation: notNeeded | userOnce | userChat | userAlways | userDenied | chatGrant |
--                 alwaysGrant | schedule; NULL when the user started the call themselves, or a
--                 model's call was refused before any question (unknown tool, bad arguments)
--   duration_ms:  how long it ran (NULL while running, and for a call refused before it ran)
ALTER TABLE tool_calls ADD COLUMN started_by TEXT NOT NULL DEFAULT 'api'
    CHECK (started_by IN ('model', 'palette', 'api', 'schedule'));
ALTER TABLE tool_calls ADD COLUMN schedule_id TEXT;
ALTER TABLE tool_calls ADD COLUMN confirmation TEXT;
ALTER TABLE tool_calls ADD COLUMN toolset_id TEXT;
ALTER TABLE tool_calls ADD COLUMN provider TEXT;
ALTER TABLE tool_calls ADD COLUMN duration_ms REAL;

-- Earlier records: a call on a "tool" message came from the palette, any other in a message from
-- the model, the rest from tools/call; their durations to the millisecond (julianday is no
-- finer). Toolset and provider come from the tool while it exists (an MCP tool's id names its
-- toolset: mcp:<toolset>~<server>:<tool>).
UPDATE tool_calls SET started_by = CASE
    WHEN message_id IS NULL THEN 'api'
    WHEN (SELECT role FROM messages WHERE messages.id = tool_calls.message_id) = 'tool' THEN 'palette'
    ELSE 'model' END;
UPDATE tool_calls SET
    toolset_id = (SELECT toolset_id FROM tools WHERE tools.tool_id = tool_calls.tool_id),
    provider = (SELECT provider FROM tools WHERE tools.tool_id = tool_calls.tool_id);
UPDATE tool_calls SET provider = 'mcp', toolset_id = substr(tool_id, 5, instr(tool_id, '~') - 5)
    WHERE tool_id LIKE 'mcp:%~%';
UPDATE tool_calls SET duration_ms = round((julianday(finished_at) - julianday(started_at)) * 86400000.0)
    WHERE finished_at IS NOT NULL AND error_kind IS NOT 'interrupted';

-- Newest first, paged by (started_at, id): one index per filter a user picks alone, each ending
-- in the page order, so a filtered first page reads only the rows it returns.
DROP INDEX tool_calls_by_chat;
DROP INDEX tool_calls_by_tool;
CREATE INDEX tool_calls_by_time ON tool_calls(started_at, id);
CREATE INDEX tool_calls_by_chat ON tool_calls(chat_id, started_at, id);
CREATE INDEX tool_calls_by_tool ON tool_calls(tool_id, started_at, id);
CREATE INDEX tool_calls_by_toolset ON tool_calls(toolset_id, started_at, id);
CREATE INDEX tool_calls_by_provider ON tool_calls(provider, started_at, id);
CREATE INDEX tool_calls_by_status ON tool_calls(status, started_at, id);
CREATE INDEX tool_calls_by_starter ON tool_calls(started_by, started_at, id);
CREATE INDEX tool_calls_by_schedule ON tool_calls(schedule_id, started_at, id) WHERE schedule_id IS NOT NULL;
