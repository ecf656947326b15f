-- Slugs, versions, tags and the two timestamps of seed 002 on every stored tool, and toolsets
-- made in the UI (source_type 'user', user_mcp 0).
--
-- slug/version: what the "+" palette resolves (sidecar/tools/slugs.py). A tool stored before has
-- the slug its id gives ('_' and '.' become '-', as slugs.derive does) and version '1'.
-- current: which version of a slug `+slug` means (one per slug and toolset).
-- created_at: first insertion, never changed (an upgrade that keeps the tool keeps it).
-- modified_at: the last structural change (definition, tags), not a switch on or off.
ALTER TABLE tools ADD COLUMN slug TEXT NOT NULL DEFAULT '';
ALTER TABLE tools ADD COLUMN version TEXT NOT NULL DEFAULT '1';
ALTER TABLE tools ADD COLUMN current INTEGER NOT NULL DEFAULT 1 CHECK (current IN (0, 1));
ALTER TABLE tools ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tools ADD COLUMN created_at TEXT NOT NULL DEFAULT '';
ALTER TABLE tools ADD COLUMN modified_at TEXT NOT NULL DEFAULT '';
ALTER TABLE toolsets ADD COLUMN modified_at TEXT NOT NULL DEFAULT '';

-- A toolset's modified_at stays '' here and reads as its installed_at (store/toolsets.py): an
-- UPDATE of toolsets would run tool search's trigger, whose index use has the closing PRAGMA
-- optimize write sqlite_stat1 into a migrated file only (tests/store/test_db.py compares them).
UPDATE tools SET
    slug = replace(replace(substr(tool_id, instr(tool_id, ':') + 1), '_', '-'), '.', '-'),
    created_at = coalesce((SELECT installed_at FROM toolsets WHERE id = tools.toolset_id),
                          strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    modified_at = coalesce((SELECT updated_at FROM toolsets WHERE id = tools.toolset_id),
                           strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
-- Two ids of one toolset that differ only by '_' against '-' or '.' would share a slug: the later
-- one keeps its own by its row number (a bundle like that is refused from now on). NOT INDEXED:
-- an index used here would have the closing PRAGMA optimize write sqlite_stat1 into a migrated
-- file and not into a new one (tests/store/test_db.py compares the two schemas).
UPDATE tools NOT INDEXED SET slug = slug || '-' || rowid
WHERE toolset_id IS NOT NULL AND unavailable_reason IS NULL AND rowid NOT IN (
    SELECT min(rowid) FROM tools NOT INDEXED WHERE toolset_id IS NOT NULL AND unavailable_reason IS NULL
    GROUP BY toolset_id, slug);

-- Among the tools that can run: a tool kept unavailable (it left its manifest, with an override
-- or past calls) keeps its slug and version, and a new tool may take them.
-- A row written without a slug (raw SQL, as some tests do) is not one the palette can name.
CREATE UNIQUE INDEX tools_by_slug_version ON tools(toolset_id, slug, version)
WHERE unavailable_reason IS NULL AND slug != '';
CREATE UNIQUE INDEX tools_current_slug ON tools(toolset_id, slug)
WHERE current = 1 AND unavailable_reason IS NULL AND slug != '';
CREATE INDEX tools_by_slug ON tools(slug);
