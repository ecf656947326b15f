"""The search index of the tool catalog (tools/search) on SQLite FTS5: its documents, how a query
becomes FTS5 match expressions, and the ranked, keyset-paged read.

Tiers (seed 002: prefix > whole word > fuzzy > recency):
  0 prefix - the slug, id, name or display name begins with the query, word by word, the last
             word possibly unfinished ("web sea" -> "web-search");
  1 word   - every query word is a whole word of some field (slug, id, name, display name,
             description, tags), in any order;
  2 fuzzy  - every query word is found inside some field: a word of three or more characters
             anywhere (the trigram table), a shorter one at the start of a word (a trigram index
             cannot see fewer than three characters);
  3 recent - an empty query (or one without a letter or digit): every tool.
Within a tier: most recently modified first, then most called, then by id (a total order, so
keyset pages neither repeat nor skip).

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


class HitRow(msgspec.Struct, frozen=True):
    tool_id: str
    tier: int
    modified_at: str
    call_count: int

    def position(self) -> tuple[int, str, int, str]:
        return (self.tier, self.modified_at, self.call_count, self.tool_id)


def words_of(q: str) -> list[str]:
    """The query's words as the index cuts text into words (NFKC first: full-width letters match)."""
    return _WORD.findall(unicodedata.normalize("NFKC", q))


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


class Match(msgspec.Struct, frozen=True):
    """The FTS5 expressions of one query (None: the tier's condition does not apply)."""

    prefix: str
    word: str
    fuzzy_trigrams: str | None
    fuzzy_words: str | None


def match_of(words: list[str]) -> Match | None:
    """None for a query without words (the recency tier)."""
    if not words:
        return None
    distinct = list(dict.fromkeys(w.casefold() for w in words))
    long = [w for w in distinct if len(w) >= TRIGRAM]
    short = [w for w in distinct if len(w) < TRIGRAM]
    return Match(
        prefix="{slug tool_id name display} : ^ " + _quoted(" ".join(words)) + " *",
        word=" AND ".join(_quoted(w) for w in distinct),
        fuzzy_trigrams=" AND ".join(_quoted(w) for w in long) if long else None,
        fuzzy_words=" AND ".join(_quoted(w) + " *" for w in short) if short else None,
    )


_IN_WORDS = "d.doc IN (SELECT rowid FROM tool_search_words WHERE tool_search_words MATCH ?)"
_IN_TRIGRAMS = "d.doc IN (SELECT rowid FROM tool_search_trigrams WHERE tool_search_trigrams MATCH ?)"
_AFTER = ("(tier > ? OR (tier = ? AND (modified_at < ? OR (modified_at = ? AND (call_count < ? OR "
          "(call_count = ? AND tool_id > ?))))))")


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
        if reindex or gone:
            self.generation += 1
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

    async def search(self, match: Match | None, *, include_disabled: bool, toolset_ids: list[str] | None,
                     after: tuple[int, str, int, str] | None, limit: int) -> list[HitRow]:
        """Up to ``limit`` hits in rank order, starting after the position ``after``."""
        where: list[str] = []
        args: list[Any] = []
        if match is None:
            tier = str(RECENT)
        else:
            tier = f"CASE WHEN {_IN_WORDS} THEN {PREFIX} WHEN {_IN_WORDS} THEN {WORD} ELSE {FUZZY} END"
            args += [match.prefix, match.word]
            fuzzy = [c for c, e in ((_IN_TRIGRAMS, match.fuzzy_trigrams), (_IN_WORDS, match.fuzzy_words)) if e]
            where.append(f"({_IN_WORDS} OR {_IN_WORDS} OR ({' AND '.join(fuzzy)}))")
            args += [match.prefix, match.word, *(e for e in (match.fuzzy_trigrams, match.fuzzy_words) if e)]
        if not include_disabled:
            where.append("d.enabled")
        if toolset_ids is not None:
            where.append(f"d.toolset_id IN ({', '.join('?' * len(toolset_ids))})")
            args += toolset_ids
        sql = (f"SELECT d.tool_id, {tier} AS tier, d.modified_at, d.call_count FROM tool_search_docs d"
               + (f" WHERE {' AND '.join(where)}" if where else ""))
        outer: list[Any] = []
        if after is not None:
            t, m, c, i = after
            outer = [t, t, m, m, c, c, i]
        rows = await self.db.fetchall(
            f"SELECT * FROM ({sql})" + (f" WHERE {_AFTER}" if after is not None else "")
            # (Without a query the tier is one constant: left out, the order is the recency index's.)
            + f" ORDER BY {'tier, ' if match is not None else ''}modified_at DESC, call_count DESC, tool_id LIMIT ?",
            (*args, *outer, limit))
        return [HitRow(r["tool_id"], r["tier"], r["modified_at"], r["call_count"]) for r in rows]

    async def vocabulary(self) -> Vocabulary:
        rows = await self.db.fetchall("SELECT term, doc FROM tool_search_vocab")
        total = await self.db.fetchone("SELECT count(*) FROM tool_search_docs")
        return Vocabulary({r[0]: r[1] for r in rows}, total[0] if total is not None else 0)

    async def lexical(self, match: str, *, tool_ids: list[str] | None, limit: int) -> list[Scored]:
        """The enabled tools ``match`` (an FTS5 expression of quoted terms) finds, best bm25 first
        (ties by id: a total order), at most ``limit``. ``tool_ids``: only these."""
        where = "tool_search_words MATCH ? AND d.enabled"
        args: list[Any] = [match]
        if tool_ids is not None:
            where += " AND d.tool_id IN (SELECT value FROM json_each(?))"
            args.append(msgspec.json.encode(tool_ids).decode())
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
