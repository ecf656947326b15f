-- Why a tool call failed (arguments, raised, timeout, crashed, memory, output, cancelled, ...), so
-- the UI can say "timed out" without parsing the message.
ALTER TABLE tool_calls ADD COLUMN error_kind TEXT;

-- Calls left running by a sidecar that stopped abruptly are failed on the next start.
CREATE INDEX tool_calls_unfinished ON tool_calls(status) WHERE status IN ('pending', 'running');
