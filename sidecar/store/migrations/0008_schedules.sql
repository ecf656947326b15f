-- Tools that run on a schedule (seed 004 cron triggers). tool_id and chat_id are not foreign
-- keys on purpose: a schedule whose tool or chat is deleted is kept, paused with a reason
-- (paused_reason), so the user sees what stopped and why instead of losing it.
CREATE TABLE schedules (
    id               TEXT PRIMARY KEY,
    tool_id          TEXT NOT NULL,
    args             TEXT NOT NULL DEFAULT '{}',
    cron             TEXT NOT NULL, -- five fields, normalised
    timezone         TEXT NOT NULL, -- IANA name the cron is read in
    prompt           TEXT,
    chat_id          TEXT,
    provider         TEXT,
    model            TEXT,
    enabled          INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    missed           TEXT NOT NULL DEFAULT 'runOnce' CHECK (missed IN ('skip', 'runOnce')),
    allow_unattended INTEGER NOT NULL DEFAULT 0 CHECK (allow_unattended IN (0, 1)),
    paused_reason    TEXT,
    source           TEXT NOT NULL DEFAULT 'user' CHECK (source IN ('user', 'manifest')),
    toolset_id       TEXT, -- the toolset whose manifest declared it (source 'manifest')
    declared         TEXT, -- JSON {schedule, prompt}: the trigger as the manifest last said it
    next_run_at      TEXT, -- UTC; the slot the scheduler waits for
    last_run_at      TEXT,
    last_tool_call_id TEXT,
    last_status      TEXT,
    last_error       TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
-- The scheduler's one question: what is due first among the schedules that may fire.
CREATE INDEX schedules_due ON schedules(next_run_at) WHERE enabled = 1 AND paused_reason IS NULL;
CREATE UNIQUE INDEX schedules_of_manifest ON schedules(tool_id) WHERE source = 'manifest';
