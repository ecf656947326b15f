"""The search index of the tool catalog (tools/search) on SQLite FTS5: its documents, how a query
becomes FTS5 match expressions, and the ranked, keyset-paged read.

Tiers (seed 002: prefix > whole word > fuzzy > recency):
  0 prefix - the slug, id, name or display name begins with the query as typed, word by word, the
             last word possibly unfinished ("web sea" -> "web-search");
  1 word   - every word of the query that counts (common English words left out) is, as typed, a
             whole word of some field (slug, id, name, display name, description, tags,
             parameters), in any order;
  2 fuzzy  - found otherwise: by some of the query's words only, by a typo's correction (the
             terms tools/query.py gives), or by a word inside a word (three or more characters
             anywhere: the trigram table; a shorter one at the start of a word);
  3 recent - an empty query (or one without a letter or digit): every tool.
Within a tier: the most relevant first (bm25 over the query's terms and their corrections, fields
weighted by WEIGHTS; a hit found only inside a word has none), then the most recently modified,
then the most called, then by id: a total order, so keyset pages neither repeat nor skip. Relevance
leads because within the fuzzy tier it is what tells "the commit tool" from "a tool that mentions
show"; recency and usage order what relevance cannot tell apart (5,000 tools described alike).

The user's text never reaches FTS5 as syntax: it is cut into words (runs of letters and digits)
and each word is a double-quoted string, so ``*``, ``"``, ``NEAR``, ``-`` or ``:`` are text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import msgspec

from .db import Database

PREFIX, WORD, FUZZY, RECENT = 0, 1, 2, 3
TRIGRAM = 3  # the fewest characters the trigram table can find

_WORD = re.compile(r"[^\W_]+")  # unicode61's tokens: letters and digits; '_' and '-' separate


class SearchDoc(msgspec.Struct, frozen=True, kw_only=True):
    """One tool as indexed."""

    tool_id: str
    toolset_id: str  # "builtin" for built-ins
    enabled: bool
    modified_at: str  # "" when unknown: ranks as oldest
    slug: str
    name: str
    display: str
    description: str
    tags: str
    params: str = ""  # its inputSchema's property names and descriptions


class HitRow(msgspec.Struct, frozen=True, array_like=True):
    tool_id: str
    tier: int
    relevance: int  # bm25's, negated, in millionths (whole numbers tie exactly); 0: found inside a word only
    modified_at: str
    call_count: int

    def position(self) -> Position:
        return (self.tier, self.relevance, self.modified_at, self.call_count, self.tool_id)


# Where a page ended: (tier, relevance, modified_at, call_count, tool_id).
Position = tuple[int, int, str, int, str]
_HITS = msgspec.json.Decoder(list[HitRow])


def words_of(q: str) -> list[str]:
    """The query's words as the index cuts text into words (NFKC first: full-width letters match)."""
    return _WORD.findall(unicodedata.normalize("NFKC", q))


def quoted(word: str) -> str:
    """A word as an FTS5 string: never syntax, whatever it holds."""
    return '"' + word.replace('"', '""') + '"'


class Match(msgspec.Struct, frozen=True):
    """The FTS5 expressions of one query (None: the condition does not apply)."""

    prefix: str  # tier 0: the names begin with the words as typed
    every: str | None  # tier 1: every word, as typed, is a whole word
    terms: str | None  # relevance (bm25), and tier 2: any word the query stands for, corrections included
    inside: str | None  # tier 2: a word of three or more characters inside a word (trigrams)
    starts: str | None  # tier 2: a shorter word at the start of a word


def match_of(words: list[str], content: list[str] | None = None, terms: list[str] | None = None) -> Match | None:
    """``words``: the query's words as typed (None for none: the recency tier). ``content``: those
    that count for the word and fuzzy tiers (common words left out; default: all, folded);
    ``terms``: the index's words they stand for, typo corrections included (default: ``content``)."""
    if not words:
        return None
    content = content if content is not None else list(dict.fromkeys(w.casefold() for w in words))
    terms = terms if terms is not None else content
    long = [w for w in content if len(w) >= TRIGRAM]
    # One letter starts too many words to say anything (a first keystroke finds the names that begin
    # with it: the prefix tier).
    short = [w for w in content if 1 < len(w) < TRIGRAM]
    return Match(
        prefix="{slug tool_id name display} : ^ " + quoted(" ".join(words)) + " *",
        every=" AND ".join(quoted(w) for w in content) if content else None,
        terms=" OR ".join(quoted(t) for t in dict.fromkeys(terms)) if terms else None,
        inside=" OR ".join(quoted(w) for w in long) if long else None,
        starts=" OR ".join(quoted(w) + " *" for w in short) if short else None,
    )


_WORDS = "SELECT rowid FROM tool_search_words WHERE tool_search_words MATCH ?"  # (rowid: the doc)
_TRIGRAMS = "SELECT rowid FROM tool_search_trigrams WHERE tool_search_trigrams MATCH ?"
_AFTER = ("(tier > ? OR (tier = ? AND (relevance < ? OR (relevance = ? AND (modified_at < ? OR (modified_at = ? "
          "AND (call_count < ? OR (call_count = ? AND tool_id > ?))))))))")
RELEVANCE_SCALE = 1_000_000  # relevance is kept in millionths: equal documents tie, a token says it exactly
# An FTS5 table written in batches is many segments (b-trees), and every term of a query is looked up
# in each: at 5,000 tools in 11 segments, merged into one ('optimize'), bm25 over a sentence's terms
# took half the time and the trigram look-up a quarter. Merging costs about what writing every
# document once did (~0.5 s at 5,000 tools on a loaded machine), so the tables are looked at by the
# first sync of a run (an index built by earlier runs) and after MERGE_AFTER documents written, and
# merged when either holds more than MAX_SEGMENTS segments (FTS5's own merging keeps a few per level).
MERGE_AFTER = 1000
MAX_SEGMENTS = 4
_V2 = b"\xff\x00\x00\x01"  # FTS5's structure record, second version: after the cookie


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at ``at`` (big-endian 7-bit groups; the ninth byte whole), and where it ends."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def segments(structure: bytes) -> int:
    """The number of segments an FTS5 structure record (its ``_data`` row 10) names: a 4-byte
    cookie, the V2 mark if any, then the number of levels and of segments (fts5_index.c)."""
    at = 4 + (len(_V2) if structure[4:8] == _V2 else 0)
    _, at = _varint(structure, at)
    return _varint(structure, at)[0]


_INDEXED = """
SELECT d.tool_id, d.toolset_id, d.enabled, d.modified_at, w.slug, w.name, d.display, d.description,
       d.tags, d.params
FROM tool_search_docs d JOIN tool_search_words w ON w.rowid = d.doc
"""


def _doc(r: Any) -> SearchDoc:
    return SearchDoc(tool_id=r["tool_id"], toolset_id=r["toolset_id"], enabled=bool(r["enabled"]),
                     modified_at=r["modified_at"], slug=r["slug"], name=r["name"],
                     display=r["display"], description=r["description"], tags=r["tags"], params=r["params"])


# bm25() column weights, in the tables' column order (slug, tool_id, name, display, description,
# tags, params): what a tool is called counts most, then its title, its tags, what it says it does,
# and least what it takes. tool_id holds the toolset's id too (a server's name: "github").
WEIGHTS = (6.0, 3.0, 6.0, 4.0, 2.0, 3.0, 1.0)
_BM25 = f"bm25(tool_search_words, {', '.join(map(str, WEIGHTS))})"


class Vocabulary(msgspec.Struct, frozen=True):
    """Every word of the index with the number of documents holding it, and how many there are."""

    docs: dict[str, int]
    total: int


class Scored(msgspec.Struct, frozen=True):
    tool_id: str
    score: float  # bm25's, negated: higher is more relevant


class ToolSearchRepo:
    def __init__(self, db: Database) -> None:
        self.db = db
        # Moves on every sync that changed a document: what is derived from the index (its
        # vocabulary) is kept until it moves.
        self.generation = 0
        self.written = 0  # documents written since the tables were last looked at (MERGE_AFTER)
        self.looked = False  # whether this run looked at them yet
        self.merges = 0

    async def dirty(self) -> list[tuple[str, int]]:
        """The stored tools changed since they were last indexed, with their mark's ``seq`` (triggers
        mark them, whoever writes: see migration 0012)."""
        return [(r[0], r[1]) for r in await self.db.fetchall("SELECT tool_id, seq FROM tool_search_dirty")]

    async def mcp_dirty(self) -> list[tuple[str, int]]:
        """The toolsets whose MCP tools' documents may be stale, with their mark's ``seq``."""
        return [(r[0], r[1]) for r in await self.db.fetchall("SELECT toolset_id, seq FROM tool_search_mcp_dirty")]

    async def mcp_docs(self) -> list[SearchDoc]:
        """The MCP tools as indexed (they are not rows of ``tools``: diffed in Python)."""
        return [_doc(r) for r in await self.db.fetchall(_INDEXED + " WHERE d.tool_id LIKE 'mcp:%'")]

    async def sync(self, reindex: list[SearchDoc], gone: list[str], done: list[tuple[str, int]],
                   mcp_done: Sequence[tuple[str, int]] = ()) -> None:
        """One transaction: ``reindex`` (new or changed) indexed as given, ``gone`` dropped, and the
        marks ``done`` (stored tools) and ``mcp_done`` (toolsets' MCP tools) cleared unless a write
        marked them again meanwhile (its ``seq`` moved)."""
        changes = bool(reindex or gone)
        if changes:
            self.generation += 1
        try:
            await self._sync(reindex, gone, done, mcp_done)
        finally:
            # Moved again once written: what was read while the write was open (rows half
            # written, or rolled back) is not kept under the generation that follows.
            if changes:
                self.generation += 1

    async def _sync(self, reindex: list[SearchDoc], gone: list[str], done: list[tuple[str, int]],
                    mcp_done: Sequence[tuple[str, int]]) -> None:
        async with self.db.write() as w:
            drop = [(t,) for t in (*gone, *(d.tool_id for d in reindex))]
            for table in ("tool_search_words", "tool_search_trigrams"):
                await w.executemany(
                    f"DELETE FROM {table} WHERE rowid = (SELECT doc FROM tool_search_docs WHERE tool_id = ?)", drop)
            await w.executemany("DELETE FROM tool_search_docs WHERE tool_id = ?", [(t,) for t in gone])
            # Usage comes from tool_usage, here and by its triggers after (migration 0012).
            await w.executemany(
                "INSERT INTO tool_search_docs (tool_id, toolset_id, enabled, modified_at, call_count, display, "
                "description, tags, params) VALUES (?1, ?2, ?3, ?4, COALESCE((SELECT call_count FROM tool_usage "
                "WHERE tool_id = ?1), 0), ?5, ?6, ?7, ?8) ON CONFLICT (tool_id) DO UPDATE SET "
                "toolset_id = excluded.toolset_id, enabled = excluded.enabled, modified_at = excluded.modified_at, "
                "call_count = excluded.call_count, display = excluded.display, description = excluded.description, "
                "tags = excluded.tags, params = excluded.params",
                [(d.tool_id, d.toolset_id, int(d.enabled), d.modified_at, d.display, d.description, d.tags,
                  d.params) for d in reindex])
            for table in ("tool_search_words", "tool_search_trigrams"):
                await w.executemany(
                    f"INSERT INTO {table} (rowid, slug, tool_id, name, display, description, tags, params) "
                    "SELECT doc, ?, ?, ?, ?, ?, ?, ? FROM tool_search_docs WHERE tool_id = ?",
                    [(d.slug, d.tool_id, d.name, d.display, d.description, d.tags, d.params, d.tool_id)
                     for d in reindex])
            await w.executemany("DELETE FROM tool_search_dirty WHERE tool_id = ? AND seq = ?", done)
            await w.executemany("DELETE FROM tool_search_mcp_dirty WHERE toolset_id = ? AND seq = ?", mcp_done)
            written = self.written + len(drop)
            look = written >= MERGE_AFTER or not self.looked
            merge = look and await self._fragmented(w)
            if merge:
                for table in ("tool_search_words", "tool_search_trigrams"):
                    await w.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        # (Counted once committed: a rolled-back write wrote nothing.)
        self.written = 0 if look else written
        self.looked = True
        self.merges += merge

    async def _fragmented(self, w: Any) -> bool:
        for table in ("tool_search_words", "tool_search_trigrams"):
            row = await (await w.execute(f"SELECT block FROM {table}_data WHERE id = 10")).fetchone()
            try:
                if row is not None and segments(row[0]) > MAX_SEGMENTS:
                    return True
            except IndexError:  # (a record this reader cannot parse: left as it is)
                pass
        return False

    async def search(self, match: Match | None, *, include_disabled: bool, toolset_ids: list[str] | None,
                     after: Position | None, limit: int, tool_id: str | None = None) -> list[HitRow]:
        """Up to ``limit`` hits in rank order (tier, relevance, recency, usage, id), starting after
        the position ``after``. ``tool_id``: that tool's hit alone (where it ranks now).

        A word found inside a word (the trigram table) adds only hits of the fuzzy tier without
        relevance, (2, 0), which rank after every hit of a better tier or some relevance. The
        trigram look-up is the dearest but one, and a sentence's words find hundreds of tools by
        bm25: the ranking is read without it first, and again with it only when fewer than
        ``limit`` of the hits read rank before (2, 0) -- the same hits either way."""
        if match is not None and match.inside is not None:
            rows = await self._search(msgspec.structs.replace(match, inside=None), include_disabled=include_disabled,
                                      toolset_ids=toolset_ids, after=after, limit=limit, tool_id=tool_id)
            if sum(1 for r in rows if r.tier < FUZZY or r.relevance > 0) >= limit:
                return rows
        return await self._search(match, include_disabled=include_disabled, toolset_ids=toolset_ids, after=after,
                                  limit=limit, tool_id=tool_id)

    async def _search(self, match: Match | None, *, include_disabled: bool, toolset_ids: list[str] | None,
                      after: Position | None, limit: int, tool_id: str | None) -> list[HitRow]:
        where: list[str] = []
        args: list[Any] = []  # in the order their ? appear
        if match is None:
            sql = (f"SELECT d.tool_id, {RECENT} AS tier, 0 AS relevance, d.modified_at, d.call_count "
                   "FROM tool_search_docs d")
        else:
            # Each document some condition finds, once, with its best tier and its bm25 relevance
            # over the query's terms (computed once per document holding one of them).
            found = [f"SELECT rowid, {PREFIX}, 0.0 FROM ({_WORDS})"]
            args.append(match.prefix)
            if match.terms is not None:
                found.append(f"SELECT rowid, {FUZZY}, -{_BM25} FROM tool_search_words WHERE tool_search_words MATCH ?")
                args.append(match.terms)
            for select, tier, expr in ((_WORDS, WORD, match.every), (_TRIGRAMS, FUZZY, match.inside),
                                       (_WORDS, FUZZY, match.starts)):
                if expr:
                    found.append(f"SELECT rowid, {tier}, 0.0 FROM ({select})")
                    args.append(expr)
            sql = (f"SELECT d.tool_id, f.tier, CAST(round(f.score * {RELEVANCE_SCALE}) AS INTEGER) AS relevance, "
                   "d.modified_at, d.call_count FROM (SELECT doc, min(tier) AS tier, max(score) AS score FROM "
                   f"(SELECT NULL AS doc, NULL AS tier, NULL AS score WHERE 0 UNION ALL {' UNION ALL '.join(found)}) "
                   "GROUP BY doc) AS f JOIN tool_search_docs d ON d.doc = f.doc")
        if not include_disabled:
            where.append("d.enabled")
        if toolset_ids is not None:
            where.append(f"d.toolset_id IN ({', '.join('?' * len(toolset_ids))})")
            args += toolset_ids
        if tool_id is not None:
            where.append("d.tool_id = ?")
            args.append(tool_id)
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        outer: list[Any] = []
        if after is not None:
            t, r, m, c, i = after
            outer = [t, t, r, r, m, m, c, c, i]
        # The page comes back as one JSON array decoded in one go: a thousand rows handed over one
        # by one cost milliseconds. (SQLite aggregates a sorted subquery in its order.)
        row = await self.db.fetchone(
            "SELECT json_group_array(json_array(tool_id, tier, relevance, modified_at, call_count)) FROM ("
            f"SELECT * FROM ({sql})" + (f" WHERE {_AFTER}" if after is not None else "")
            # (Without a query the tier is one constant: left out, the order is the recency index's.)
            + (" ORDER BY tier, relevance DESC, " if match is not None else " ORDER BY ")
            + "modified_at DESC, call_count DESC, tool_id LIMIT ?)",
            (*args, *outer, limit))
        return _HITS.decode(row[0]) if row is not None else []

    async def vocabulary(self) -> Vocabulary:
        rows = await self.db.fetchall("SELECT term, doc FROM tool_search_vocab")
        total = await self.db.fetchone("SELECT count(*) FROM tool_search_docs")
        return Vocabulary({r[0]: r[1] for r in rows}, total[0] if total is not None else 0)

    async def lexical(self, match: str, *, tool_ids: list[str] | None, limit: int) -> list[Scored]:
        """The enabled tools ``match`` (an FTS5 expression of quoted terms) finds, best bm25 first
        (ties by id: a total order), at most ``limit``. ``tool_ids``: only these, enabled or not (a
        chat's box holds the tools its branch attached even where their toolset is off)."""
        where = "tool_search_words MATCH ?"
        args: list[Any] = [match]
        if tool_ids is not None:
            where += " AND d.tool_id IN (SELECT value FROM json_each(?))"
            args.append(msgspec.json.encode(tool_ids).decode())
        else:
            where += " AND d.enabled"
        rows = await self.db.fetchall(
            f"SELECT d.tool_id, -{_BM25} AS score FROM tool_search_words JOIN tool_search_docs d "
            f"ON d.doc = tool_search_words.rowid WHERE {where} ORDER BY score DESC, d.tool_id LIMIT ?",
            (*args, limit))
        return [Scored(r[0], r[1]) for r in rows]

    async def texts(self, tool_ids: list[str]) -> dict[str, str]:
        """The indexed text of these tools, every field in one (to tell which words each holds)."""
        rows = await self.db.fetchall(
            "SELECT d.tool_id, w.slug, w.tool_id, w.name, w.display, w.description, w.tags, w.params "
            "FROM tool_search_docs d JOIN tool_search_words w ON w.rowid = d.doc "
            "WHERE d.tool_id IN (SELECT value FROM json_each(?))", (msgspec.json.encode(tool_ids).decode(),))
        return {r[0]: " ".join(r[1:]) for r in rows}
