"""Which tools fit a piece of text (seed 004 "Tool Relevance Service"): the words it shares with a
tool (the lexical ranker, BM25 in tools/search's index) fused with how close in meaning it is to
the tool's text (a local sentence-embedding model, sidecar/embedding).

Fusion is reciprocal-rank fusion (k = 60): BM25 scores and cosines live on different scales, and
a lexical score is normalised per answer (its best hit is 1 whatever it matched), so a weighted
sum of the two would mix a relative scale with an absolute one and need weights tuned against
some set of phrasings. RRF needs only the two orders and is what published hybrid tool retrieval
uses. The threshold is applied where a score means something on its own: a tool enters the
embedding side only at a cosine of at least 0.2; the lexical side enters what shares a word with
the text. Seed 004's default of 0.35 is a threshold for a model whose cosines run higher: with
all-MiniLM-L6-v2 a casual request and the description of the tool it needs often score 0.2-0.35
("mail my boss" / send_email 0.34), and 0.35 left the meaning side of most such requests empty
(the 59-tool set of scripts/bench_tool_selection.py: recall@5 by meaning 0.40 at 0.35, 0.75 at
0.2). A tool either side ranks is a candidate; the cap is ``limit``.

Every tool of every provider is indexed (disabled ones too, so switching one on needs no
embedding): the stored tools and the MCP tools their servers list now, kept current as
tools/search keeps its index (the catalog's version, the servers' listings). Vectors are cached
in SQLite by model and a digest of the tool's text, so only a new or changed text is embedded;
that happens in the background, batched, and a ranking waits for it at most ``wait`` seconds
(tools not embedded by then rank by words alone).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.abc import TaskGroup

from ..api.tools import Tool
from ..embedding import EmbeddingModel, ModelUnavailable
from ..embedding.model import MAX_CHARS
from ..store import CATALOG, Database
from ..store.tool_embeddings import ToolEmbeddingsRepo
from .ranking import Mode, Ranked
from .search import Listings, same_listings

if TYPE_CHECKING:
    import numpy as np

    from .catalog import Catalog

log = logging.getLogger("sidecar.tools")

THRESHOLD = 0.2  # the least cosine a tool ranks by meaning at (why not seed 004's 0.35: above)
RRF_K = 60  # reciprocal-rank fusion's constant (Cormack et al. 2009): flattens the head of each list
DEPTH = 50  # each side contributes its best this many (at least ``limit``) to the fusion
WAIT = 2.0  # seconds a ranking waits for tools being embedded before it ranks without them
DRAIN = 256  # texts embedded per step of the background embedder, stored as each step ends
WARM_AFTER = 5.0  # seconds after start-up the model is loaded and the catalog embedded unasked
# ... when the catalog holds this many enabled tools: below, a turn offers every tool and nothing
# ranks unless asked (tools/relevant), so ~200 MB and ~0.6 s of CPU wait for the first ranking.
WARM_FROM = 30


class Lexical(Protocol):
    """The lexical ranker (ToolSearch.lexical): BM25 over name, title, description, parameters, tags."""

    async def __call__(self, text: str, *, limit: int, tool_ids: Collection[str] | None = None) -> list[Ranked]: ...


def text_of(tool: Tool) -> str:
    """What is embedded of a tool: its name, title, description, parameters and tags, cut to what
    the model reads (so a 1 MB description costs what 4 KiB does)."""
    name = tool.id.rsplit(":", 1)[-1].replace("_", " ").replace("-", " ")
    parts = [name]
    parts += [t for t in dict.fromkeys((tool.name, tool.title)) if t and t.casefold() != name.casefold()]
    if tool.description:
        parts.append(tool.description[:MAX_CHARS])
    props: Any = (tool.input_schema or {}).get("properties")
    if isinstance(props, dict):
        params = [f"{k}: {v.get('description', '')}".rstrip(": ") if isinstance(v, dict) else str(k)
                  for k, v in list(props.items())[:64]]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType, reportUnknownMemberType]
        parts.append("Parameters: " + "; ".join(params))
    if tool.tags:
        parts.append("Tags: " + ", ".join(tool.tags))
    return "\n".join(parts)[:MAX_CHARS]


def digest_of(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def _text_and_digest(tool: Tool) -> tuple[str, bytes]:
    text = text_of(tool)
    return text, digest_of(text)


@dataclass(frozen=True, slots=True)
class _Rows:
    ids: list[str]
    index: dict[str, int]  # tool id -> its row
    matrix: np.ndarray  # one unit vector a row
    enabled: np.ndarray  # the rows that rank when no tool ids are given


class Relevance:
    """The Ranker of tools/relevant and of a turn's offered tools."""

    def __init__(self, db: Database, catalog: Catalog, model: EmbeddingModel, lexical: Lexical | None = None, *,
                 threshold: float = THRESHOLD, wait: float = WAIT) -> None:
        self.db = db
        self.catalog = catalog
        self.model = model
        self.lexical = lexical
        self.threshold = threshold
        self.wait = wait
        self.repo = ToolEmbeddingsRepo(db)
        self._tg: TaskGroup | None = None
        self._lock = anyio.Lock()
        self._version: int | None = None
        self._listings: Listings = []
        self._stored: dict[str, Tool] = {}  # built-in, Python and HTTP tools, enabled or not
        self._mcp: dict[str, Tool] = {}
        self._digest: dict[str, bytes] = {}  # tool id -> digest of its text
        self._vectors: dict[bytes, np.ndarray] = {}  # digest -> unit vector, for the tools indexed now
        self._stored_texts: dict[str, tuple[str, bytes]] = {}  # stored tool id -> (text, digest)
        self._unchecked: dict[bytes, str] = {}  # digest -> text, not looked up in the cache yet
        self._todo: dict[bytes, str] = {}  # digest -> text, not in the cache: waiting to be embedded
        self._drained: anyio.Event | None = None  # set when the background embedder has nothing left
        self._matrix: _Rows | None = None  # the embedded tools as one matrix
        self.embedded = 0  # texts embedded since start (the rest came from the cache)
        self.warmed = anyio.Event()  # set once the start-up warming has looked (and loaded, or not)

    def bind(self, tg: TaskGroup, warm_after: float | None = WARM_AFTER) -> None:
        """Embed in ``tg`` from now on; ``warm_after``: load the model and embed the catalog that many
        seconds from now, unasked, so the first turn finds both ready (None: at the first ranking)."""
        self._tg = tg
        if warm_after is not None:
            tg.start_soon(self._warm, warm_after)

    async def _warm(self, after: float) -> None:
        await anyio.sleep(after)  # initialize and the first requests go first
        try:
            if not self._current():
                async with self._lock:
                    await self._reread()
            enabled = sum(t.enabled for t in (*self._stored.values(), *self._mcp.values()))
            if enabled >= WARM_FROM:
                await self.refresh()
        except Exception:  # (a database closing under it at shutdown): the first ranking tries again
            log.warning("the tool relevance index was not prepared in the background", exc_info=True)
        finally:
            self.warmed.set()

    def tool(self, tool_id: str) -> Tool | None:
        """A ranked tool as tools/list showed it when the index last read the catalog."""
        return self._mcp.get(tool_id) or self._stored.get(tool_id)

    # -- the index ---------------------------------------------------------------------------

    def _current(self) -> bool:
        version = self.db.version(CATALOG)
        return version is not None and version == self._version and same_listings(self.catalog.host.listings(),
                                                                           self._listings)

    async def refresh(self) -> None:
        """Read the catalog again if it changed, and start embedding any text not embedded yet."""
        if not self._current():
            async with self._lock:
                if not self._current():
                    await self._reread()
        await self._embed_missing()

    async def _reread(self) -> None:
        version, listings = self.db.version(CATALOG), self.catalog.host.listings()
        if version is None or version != self._version:
            stored = await self.catalog.list_tools(include_disabled=True, live=[])
            self._stored = {t.id: t for t in stored if t.current is not False}
            self._stored_texts = {t.id: _text_and_digest(t) for t in self._stored.values()}
        # A server that lists again (even 100 times a second) costs a read of the live tools only.
        self._mcp = {t.id: t for t in await self.catalog.mcp_tools() if t.current is not False}
        texts = self._stored_texts | {t.id: _text_and_digest(t) for t in self._mcp.values()}
        self._digest = {tool_id: d for tool_id, (_, d) in texts.items()}
        keep = set(self._digest.values())
        self._vectors = {d: v for d, v in self._vectors.items() if d in keep}  # memory follows the catalog
        self._todo = {d: t for d, t in self._todo.items() if d in keep}
        self._unchecked = {d: text for text, d in texts.values() if d not in self._vectors and d not in self._todo}
        self._matrix = None
        self._version, self._listings = version, listings

    async def _embed_missing(self) -> None:
        if not (self._todo or self._unchecked) or not await self.model.ready():
            return
        model_id = self.model.model_id
        assert model_id is not None
        import numpy as np

        # New texts are looked up in the cache once; what it lacks waits for the embedder.
        unchecked, self._unchecked = self._unchecked, {}
        cached = await self.repo.get(model_id, list(unchecked))
        for d, text in unchecked.items():
            if (blob := cached.get(d)) is not None:
                self._vectors[d] = np.frombuffer(blob, dtype="<f4")
            else:
                self._todo[d] = text
        if cached:
            self._matrix = None
        if self._todo and self._drained is None:
            self._drained = anyio.Event()
            if self._tg is not None:
                self._tg.start_soon(self._drain, model_id)
            else:  # not bound (a test's own instance): the caller embeds
                await self._drain(model_id)

    async def _drain(self, model_id: str) -> None:
        import numpy as np

        try:
            while self._todo:
                step = list(self._todo.items())[:DRAIN]
                vectors = await self.model.embed([t for _, t in step])
                rows = [(d, np.ascontiguousarray(v, dtype="<f4")) for (d, _), v in zip(step, vectors, strict=True)]
                await self.repo.put(model_id, [(d, v.tobytes()) for d, v in rows])
                for d, v in rows:
                    if self._todo.pop(d, None) is not None:  # (gone from the catalog meanwhile: not kept)
                        self._vectors[d] = v
                self.embedded += len(rows)
                self._matrix = None
            keep = set(self._digest.values())
            if await self.repo.count(model_id) > 2 * len(keep) + 1000:
                await self.repo.prune(model_id, keep)
        except ModelUnavailable:
            self._todo.clear()
        except Exception:
            log.exception("embedding tools for relevance failed; they rank by words until the next change")
            self._todo.clear()
        finally:
            done, self._drained = self._drained, None
            if done is not None:
                done.set()

    async def settled(self) -> None:
        """Wait until every tool indexed now is embedded (or the model turned out unusable)."""
        await self.refresh()
        while (drained := self._drained) is not None:
            await drained.wait()

    def _rows(self) -> _Rows | None:
        if self._matrix is None:
            import numpy as np

            ids = [t for t, d in self._digest.items() if d in self._vectors]
            if not ids:
                return None
            enabled = np.array([(t := self.tool(i)) is not None and t.enabled for i in ids], dtype=bool)
            self._matrix = _Rows(ids, {t: n for n, t in enumerate(ids)},
                                 np.stack([self._vectors[self._digest[t]] for t in ids]), enabled)
        return self._matrix

    # -- ranking -----------------------------------------------------------------------------

    async def rank(self, text: str, *, limit: int, tool_ids: Collection[str] | None = None,
                   mode: Mode = "fused") -> list[Ranked]:
        if limit <= 0 or not text.strip():
            return []
        await self.refresh()
        wanted = set(tool_ids) if tool_ids is not None else None

        def candidate(tool_id: str) -> bool:
            if wanted is not None:
                return tool_id in wanted
            tool = self.tool(tool_id)
            return tool is not None and tool.enabled

        depth = max(limit, DEPTH)
        meaning: list[Ranked] | None = None
        words: list[Ranked] = []

        async def by_meaning() -> None:
            nonlocal meaning
            meaning = await self._by_meaning(text, depth, wanted)

        async def by_words() -> None:
            nonlocal words
            if self.lexical is not None:
                words = [r for r in await self.lexical(text, limit=depth, tool_ids=wanted) if candidate(r.tool_id)]

        # Side by side: the model runs on its thread while the words are ranked on the loop.
        async with anyio.create_task_group() as tg:
            if mode != "lexical":
                tg.start_soon(by_meaning)
            if mode != "embedding" or self.model.status().state == "unavailable":
                tg.start_soon(by_words)
        if mode == "embedding" and meaning is None and self.lexical is not None:  # the model failed meanwhile
            await by_words()
        if meaning is None or mode == "lexical":
            note = "" if mode == "lexical" else f" (by words only: {self.fallback_reason()})"
            return [Ranked(r.tool_id, r.score, r.why + note) for r in words[:limit]]
        if mode == "embedding":
            return meaning[:limit]
        return _fused([meaning, words], limit)

    def fallback_reason(self) -> str:
        status = self.model.status()
        return status.reason or ("the embedding model is loading" if status.state != "loaded" else "")

    async def _by_meaning(self, text: str, depth: int, wanted: set[str] | None) -> list[Ranked] | None:
        """The tools at least ``threshold`` close in meaning, best first; None without the model."""
        if self.model.status().state == "unavailable":
            return None
        if self._drained is not None:
            with anyio.move_on_after(self.wait):
                await self._drained.wait()
        try:
            query = await self.model.embed_query(text)
        except ModelUnavailable:
            return None
        rows = self._rows()
        if query is None or rows is None:
            return []
        import numpy as np

        if wanted is None:
            mask = rows.enabled
        else:
            mask = np.zeros(len(rows.ids), dtype=bool)
            mask[[n for t in wanted if (n := rows.index.get(t)) is not None]] = True
        cosines = np.where(mask, rows.matrix @ query, -2.0)
        # The best few only: a full sort of 5,000 cosines took as long as embedding the query.
        keep = min(depth, int(mask.sum()))
        if keep == 0:
            return []
        best = np.argpartition(-cosines, keep - 1)[:keep]
        order = best[np.argsort(-cosines[best], kind="stable")]
        found: list[Ranked] = []
        for n in order:
            cos = float(cosines[n])
            if cos < self.threshold:
                break
            found.append(Ranked(rows.ids[n], min(cos, 1.0), f"close in meaning ({cos:.2f})"))
        return found


def _fused(lists: list[list[Ranked]], limit: int) -> list[Ranked]:
    """Reciprocal-rank fusion; a score of 1 is first in every list that found anything."""
    answered = [r for r in lists if r]
    if not answered:
        return []
    total: dict[str, float] = {}
    why: dict[str, list[str]] = {}
    for ranked in answered:
        for i, r in enumerate(ranked):
            total[r.tool_id] = total.get(r.tool_id, 0.0) + 1.0 / (RRF_K + i + 1)
            why.setdefault(r.tool_id, []).append(r.why)
    best = len(answered) / (RRF_K + 1)
    order = sorted(total, key=lambda t: (-total[t], t))[:limit]
    return [Ranked(t, min(total[t] / best, 1.0), "; ".join(why[t])) for t in order]
