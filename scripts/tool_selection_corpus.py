"""The corpus of scripts/bench_tool_selection.py (scripts/data/tool_selection/, see its README): real
tool definitions in three catalogs (59, 500 and 3,000 tools, each inside the next) and requests as
users write them with the tools each needs, and how a ranking of tool ids is scored against them.

Corpus ids: a built-in tool's id as the sidecar has it (``read_file``), ``server:name`` for the
tools of the seven MCP servers and of the big catalogs. ``sidecar_id`` and ``corpus_id`` convert.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "tool_selection"
TOOLS59 = DATA / "tools59.json.gz"
CATALOG = DATA / "catalog3000.json.gz"
STUB_SERVER = DATA / "stub_server.py"
SIZES = (59, 500, 3000)
BUILTIN = "builtin"

Gold = list[list[str]]  # the tools a request needs; each a list of ids any one of which is right


def _read(path: Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


@cache
def servers59() -> list[dict[str, Any]]:
    """The seven servers and the built-ins: ``[{server, source, tools: [{name, description, inputSchema}]}]``."""
    return _read(TOOLS59)["servers"]


@cache
def catalog() -> dict[str, Any]:
    """The 2,941 tools that make the 59 set a 3,000 set: ``{servers: [{server, title, source, tools:
    [{id, name, description, inputSchema}]}], set500: [ids of them in the 500 set]}``."""
    return _read(CATALOG)


def id59(server: str, name: str) -> str:
    return name if server == BUILTIN else f"{server}:{name}"


def definitions(size: int) -> dict[str, dict[str, Any]]:
    """{corpus id: definition (name, description, inputSchema)} of the 59, 500 or 3,000 set."""
    if size not in SIZES:
        raise ValueError(f"no {size}-tool set; there are {SIZES}")
    out = {id59(s["server"], t["name"]): t for s in servers59() for t in s["tools"]}
    if size == 59:
        return out
    keep = set(catalog()["set500"]) if size == 500 else None
    for s in catalog()["servers"]:
        for t in s["tools"]:
            if keep is None or t["id"] in keep:
                out[t["id"]] = t
    return out


@cache
def phrasings(name: str) -> list[dict[str, Any]]:
    """``phrasings59.json`` or ``phrasings_large.json``: ``[{text, gold, source?}]``."""
    return _read(DATA / f"phrasings{name}.json")["phrasings"]


def phrasings_for(size: int) -> list[dict[str, Any]]:
    """The requests asked of a set: at 59 tools the hand-written ones (written for it), above them
    the benchmarks' ones whose every needed tool is in the set too (all of them at 3,000)."""
    if size == 59:
        return phrasings("59")
    ids = definitions(size).keys()
    return [p for p in phrasings("59") + phrasings("_large")
            if all(any(g in ids for g in group) for group in p["gold"])]


def sidecar_id(corpus: str) -> str:
    """The id the sidecar gives a corpus tool as the bench loads it: built-ins as they are, the seven
    servers as MCP servers (``mcp:<toolset>~<server>:<tool>``), the big catalogs as stored toolsets."""
    server, sep, name = corpus.partition(":")
    if not sep:
        return corpus
    if server in {s["server"] for s in servers59()}:
        return f"mcp:{server}~{server}:{name}"
    return corpus


def corpus_id(sidecar: str) -> str:
    if sidecar.startswith("mcp:"):
        where, _, name = sidecar[4:].partition(":")
        return f"{where.partition('~')[2] or where}:{name}"
    return sidecar


def recall_at(ranked: list[str], gold: Gold, k: int) -> float:
    """The share of the needed tools found in the first k (a group counts once, by any of its ids);
    a request needing more than k tools is judged on k of them."""
    top = set(ranked[:k])
    found = sum(1 for group in gold if top.intersection(group))
    return found / min(len(gold), k)


def reciprocal_rank(ranked: list[str], gold: Gold) -> float:
    """1/rank of the first tool that is one the request needs; 0 when none is ranked."""
    wanted = {g for group in gold for g in group}
    return next((1 / (i + 1) for i, t in enumerate(ranked) if t in wanted), 0.0)


def approx_tokens(definition: dict[str, Any]) -> int:
    """Tokens of a definition as a provider receives it (name, description, JSON schema), estimated
    at 4 characters per token of its compact JSON: no tokenizer ships with the sidecar, and the
    estimate errs the same way for ``all`` and ``auto``."""
    text = json.dumps({"name": definition.get("name", ""), "description": definition.get("description", ""),
                       "input_schema": definition.get("inputSchema") or {}}, separators=(",", ":"),
                      ensure_ascii=False)
    return (len(text) + 3) // 4
