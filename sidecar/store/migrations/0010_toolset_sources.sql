-- Where a toolset installed from a URL came from, to tell whether a newer bundle is there
-- (toolsets/checkUpdate, toolsets/upgrade): the digest of the bundle installed and the validators
-- its server gave (ETag, Last-Modified) for a conditional GET. The URL itself is the toolset's
-- source_ref; a file import of the same id drops this row.
CREATE TABLE toolset_sources (
    toolset_id    TEXT PRIMARY KEY REFERENCES toolsets(id) ON DELETE CASCADE,
    sha256        TEXT NOT NULL CHECK (length(sha256) = 64),
    size          INTEGER NOT NULL,
    etag          TEXT,
    last_modified TEXT,
    fetched_at    TEXT NOT NULL, -- when that bundle was downloaded
    checked_at    TEXT           -- when checkUpdate last asked its server
) WITHOUT ROWID;
