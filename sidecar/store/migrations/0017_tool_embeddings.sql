-- Sentence embeddings of the tools' text (tool relevance, seed 004), so a restart or a server that
-- lists the same tools again embeds nothing. Keyed by the model (name@digest of its file: vectors
-- of two files never mix) and a digest of the text embedded, not by tool: a tool whose text
-- changed gets a new row, and tools with the same text share one. Derived data: deleting rows only
-- costs embedding them again (sidecar/tools/relevance.py prunes what no tool has any more).
CREATE TABLE tool_embeddings (
    model     TEXT NOT NULL,
    text_hash BLOB NOT NULL,  -- the first 16 bytes of the sha256 of the text
    vector    BLOB NOT NULL,  -- float32, little-endian, unit length: 4 bytes per dimension
    PRIMARY KEY (model, text_hash)
) WITHOUT ROWID;
