-- Issue 28: what each model call of a turn was offered, kept with the assistant message so a
-- branch or a replay can offer the same tools again (chat/send toolsFrom) and the UI can say why.
-- JSON: [{"toolIds": [...], "deferred": n, "reason": "...", "findTools": bool,
-- "deferredIds": [...]}, ...], one per model call; NULL for a message from before it, or not from a turn.
-- A chat's own tool-selection settings need no column: chats.settings (0001) holds them.
ALTER TABLE messages ADD COLUMN tools_offered TEXT;
