-- The search index learns a tool's parameters (the names and descriptions of its inputSchema's
-- properties: "owner", "repo", "the branch to list commits of"), so a query naming what a tool
-- takes finds it, and exposes its vocabulary (fts5vocab) for typo correction against the words
-- the catalog holds ("weathr" -> "weather", sidecar/tools/query.py).
--
-- FTS5 tables take no ALTER TABLE ADD COLUMN: both are made again, empty, and every document is
-- indexed again by the next search (the index is derived data: a stored tool marked dirty is read
-- again from its view; an MCP tool with no document is new to the diff).
DROP TABLE tool_search_words;
DROP TABLE tool_search_trigrams;
DELETE FROM tool_search_docs;
ALTER TABLE tool_search_docs ADD COLUMN params TEXT NOT NULL DEFAULT '';

CREATE VIRTUAL TABLE tool_search_words USING fts5(
    slug, tool_id, name, display, description, tags, params,
    tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');

CREATE VIRTUAL TABLE tool_search_trigrams USING fts5(
    slug, tool_id, name, display, description, tags, params, tokenize = 'trigram');

-- Every distinct word of the index with the number of documents holding it ('row': across all
-- columns): the vocabulary a misspelt word is matched against, and each word's rarity.
CREATE VIRTUAL TABLE tool_search_vocab USING fts5vocab(tool_search_words, 'row');

INSERT INTO tool_search_dirty (tool_id) SELECT tool_id FROM tools WHERE true
    ON CONFLICT DO UPDATE SET seq = seq + 1;  -- (WHERE: an upsert after a SELECT needs one)
