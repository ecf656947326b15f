-- Seed 004's constraints and sandbox settings (issue 15), in four layers folded by
-- sidecar/sandbox/policy.resolve: the manifest's for the toolset (toolsets.limits) and for each
-- tool (inside tools.config, as the rest of what the manifest declares), then the user's for the
-- toolset (tool_limits with tool_id '') and for each tool, which win. Each is a policy.Patch as
-- JSON: only the fields it sets.
ALTER TABLE toolsets ADD COLUMN limits TEXT;

-- The user's layers live apart from tool_overrides: a row there also stands in for the manifest's
-- override of the same tool on upgrade, which a sandbox setting alone must not do. They outlive
-- upgrades and go with the toolset.
CREATE TABLE tool_limits (
    toolset_id TEXT NOT NULL REFERENCES toolsets(id) ON DELETE CASCADE,
    tool_id    TEXT NOT NULL,  -- toolset:tool, or '' for the whole toolset
    limits     TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (toolset_id, tool_id)
) WITHOUT ROWID;
