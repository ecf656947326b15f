-- What an HTTP tool sent (method, URL with secrets masked, status, duration per request), so the
-- record of a call says which requests it made, failed ones included.
ALTER TABLE tool_calls ADD COLUMN requests TEXT;
