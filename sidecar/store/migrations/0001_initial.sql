-- The whole schema of seed 000 §1 (with seed 001's user_mcp) plus chats and their message tree.
-- Timestamps are ISO 8601 UTC text; JSON columns hold compact JSON text.

CREATE TABLE toolsets (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    version          TEXT NOT NULL DEFAULT '',
    description      TEXT NOT NULL DEFAULT '',
    enabled          INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    user_mcp         INTEGER NOT NULL DEFAULT 0 CHECK (user_mcp IN (0, 1)),
    installed_at     TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    source_type      TEXT NOT NULL CHECK (source_type IN ('zip', 'local', 'url', 'user')),
    source_ref       TEXT,
    manifest_version TEXT NOT NULL DEFAULT '1'
);

CREATE TABLE toolset_files (
    toolset_id  TEXT NOT NULL REFERENCES toolsets(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('python', 'artifact', 'asset', 'config')),
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL CHECK (size >= 0),
    stored_path TEXT NOT NULL,
    PRIMARY KEY (toolset_id, path)
) WITHOUT ROWID;

-- Built-in and toolset tools (MCP tools are discovered at run time and never stored, seed 001).
CREATE TABLE tools (
    tool_id               TEXT PRIMARY KEY,
    toolset_id            TEXT REFERENCES toolsets(id) ON DELETE CASCADE,
    provider              TEXT NOT NULL CHECK (provider IN ('builtin', 'python', 'http')),
    name                  TEXT NOT NULL,
    description           TEXT NOT NULL DEFAULT '',
    input_schema          TEXT,
    requires_confirmation INTEGER NOT NULL DEFAULT 0 CHECK (requires_confirmation IN (0, 1)),
    enabled               INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    entrypoint            TEXT,
    config                TEXT NOT NULL DEFAULT '{}', -- per-tool limits, HTTP templates, ...
    call_count            INTEGER NOT NULL DEFAULT 0,
    last_called_at        TEXT
);
CREATE INDEX tools_by_toolset ON tools(toolset_id);

CREATE TABLE tool_overrides (
    id                    TEXT PRIMARY KEY,
    toolset_id            TEXT NOT NULL REFERENCES toolsets(id) ON DELETE CASCADE,
    tool_id               TEXT NOT NULL, -- toolset_id:tool for Python tools, server_id:tool for MCP
    renderer              TEXT,
    renderer_config       TEXT,
    name_override         TEXT,
    description_override  TEXT,
    requires_confirmation INTEGER CHECK (requires_confirmation IN (0, 1)),
    enabled               INTEGER CHECK (enabled IN (0, 1)),
    updated_at            TEXT NOT NULL,
    UNIQUE (toolset_id, tool_id)
);

CREATE TABLE toolset_mcp_servers (
    id                    TEXT NOT NULL,
    toolset_id            TEXT NOT NULL REFERENCES toolsets(id) ON DELETE CASCADE,
    server_type           TEXT NOT NULL CHECK (server_type IN ('stdio', 'sse', 'streamable-http')),
    enabled               INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    command               TEXT,
    args                  TEXT NOT NULL DEFAULT '[]',
    cwd                   TEXT,
    url                   TEXT,
    headers               TEXT NOT NULL DEFAULT '{}',
    env                   TEXT NOT NULL DEFAULT '{}',
    requires_confirmation INTEGER NOT NULL DEFAULT 0 CHECK (requires_confirmation IN (0, 1)),
    options               TEXT NOT NULL DEFAULT '{}', -- connect/call timeouts and the like
    created_at            TEXT NOT NULL,
    PRIMARY KEY (toolset_id, id)
);
CREATE INDEX mcp_servers_by_id ON toolset_mcp_servers(id);

CREATE TABLE chats (
    id                     TEXT PRIMARY KEY,
    title                  TEXT NOT NULL DEFAULT '',
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL,
    active_leaf_message_id TEXT REFERENCES messages(id) ON DELETE SET NULL,
    active_manifest_id     TEXT REFERENCES workspace_manifests(id) ON DELETE SET NULL,
    settings               TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX chats_by_update ON chats(updated_at);

CREATE TABLE workspace_manifests (
    id         TEXT PRIMARY KEY,
    chat_id    TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    parent_id  TEXT REFERENCES workspace_manifests(id) ON DELETE SET NULL,
    files      TEXT NOT NULL DEFAULT '{}', -- {path: sha256}
    created_at TEXT NOT NULL,
    source     TEXT NOT NULL CHECK (source IN ('user_upload', 'tool_run', 'branch', 'edit')),
    source_ref TEXT
);
CREATE INDEX manifests_by_chat ON workspace_manifests(chat_id, created_at);
CREATE INDEX manifests_by_parent ON workspace_manifests(parent_id);

-- The message tree: parent_id links a reply to what it answers; siblings are branches.
CREATE TABLE messages (
    id          TEXT PRIMARY KEY,
    chat_id     TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    parent_id   TEXT REFERENCES messages(id) ON DELETE CASCADE,
    role        TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content     TEXT NOT NULL DEFAULT '',
    parts       TEXT, -- JSON: structured content (tool results, attachments, images)
    manifest_id TEXT REFERENCES workspace_manifests(id) ON DELETE SET NULL,
    status      TEXT NOT NULL DEFAULT 'complete'
                CHECK (status IN ('streaming', 'complete', 'cancelled', 'error')),
    provider    TEXT,
    model       TEXT,
    stop_reason TEXT,
    usage       TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX messages_by_chat ON messages(chat_id, created_at);
CREATE INDEX messages_by_parent ON messages(parent_id);

CREATE TABLE tool_calls (
    id               TEXT PRIMARY KEY,
    chat_id          TEXT REFERENCES chats(id) ON DELETE CASCADE, -- NULL for calls outside a chat
    message_id       TEXT REFERENCES messages(id) ON DELETE CASCADE,
    tool_id          TEXT NOT NULL,
    args             TEXT NOT NULL DEFAULT '{}',
    result           TEXT,
    render_plan      TEXT,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'success', 'error')),
    error            TEXT,
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    pre_manifest_id  TEXT REFERENCES workspace_manifests(id) ON DELETE SET NULL,
    post_manifest_id TEXT REFERENCES workspace_manifests(id) ON DELETE SET NULL
);
CREATE INDEX tool_calls_by_chat ON tool_calls(chat_id, started_at);
CREATE INDEX tool_calls_by_message ON tool_calls(message_id);
CREATE INDEX tool_calls_by_tool ON tool_calls(tool_id, started_at);

-- "Allow always" decisions, bound to a digest of the tool's definition so a changed tool asks again.
CREATE TABLE tool_permissions (
    tool_id    TEXT PRIMARY KEY,
    digest     TEXT NOT NULL,
    granted_at TEXT NOT NULL
);

-- Model provider settings; api_key never leaves the sidecar unmasked.
CREATE TABLE providers (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('scripted', 'openai', 'anthropic')),
    base_url      TEXT,
    api_key       TEXT,
    default_model TEXT,
    config        TEXT NOT NULL DEFAULT '{}',
    updated_at    TEXT NOT NULL
);

CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
