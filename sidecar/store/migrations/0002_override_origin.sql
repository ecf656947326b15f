-- Upgrading a toolset replaces the overrides its manifest declares but keeps the ones the user
-- made (tools/setOverride), so each override row says where it came from.
ALTER TABLE tool_overrides ADD COLUMN origin TEXT NOT NULL DEFAULT 'manifest'
    CHECK (origin IN ('manifest', 'user'));
-- The folder holding the installed revision's files (toolsets/<id>/<revision>).
ALTER TABLE toolsets ADD COLUMN files_dir TEXT;
