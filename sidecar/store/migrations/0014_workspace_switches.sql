-- A branch switch in progress: stored before the switch touches a file of the workspace and
-- deleted in the transaction that moves the chat to its new position. A row found at start-up is
-- a switch a crash cut off: its folder is half one branch, half the other, and must not be saved
-- as an edit of the branch being left; the switch is finished from here (sidecar/workspace/versions.py).
-- leaf_message_id/manifest_id: where the chat goes (either may be NULL: no leaf, no files). They
-- are checked when the switch is finished, not by foreign keys: a switch must stay recorded
-- whatever else changes.
CREATE TABLE workspace_switches (
    chat_id         TEXT PRIMARY KEY REFERENCES chats(id) ON DELETE CASCADE,
    leaf_message_id TEXT,
    manifest_id     TEXT,
    started_at      TEXT NOT NULL
);
