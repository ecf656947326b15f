#!/usr/bin/env python3
"""Regenerate catalog3000.json.gz and phrasings_large.json from public MCP tool benchmarks, read
from local clones at the commits pinned below (``git show``, so no work tree is needed):

    .venv/bin/python scripts/data/tool_selection/build_catalogs.py --mirror /work/.mirror

``--mirror`` holds ``<owner>+<name>/repo`` git directories (or pass ``--repo owner/name=PATH``).

The 3,000 set is the 59 set (tools59.json.gz, loaded as the sidecar loads it) plus, in this order:
every tool MCPToolBench++ asks for, every tool of LiveMCPBench's LiveMCPTool (70 servers, real
``tools/list`` answers), then MCP-Zero's collection (308 servers from the MCP servers README) until
3,000, the servers named by the chosen MCP-Zero queries first; the next 100 of its tools are kept
apart ("extra"): a server new to the sidecar, to time embedding it. The 500 set is the 59 set, the
MCPToolBench++ tools and LiveMCPTool's servers in file order until 500. A server of the big sets
that is one of the seven (same name, or half its tool names) is left out: two copies of the same
tool would make the gold answer ambiguous.

Nothing here looks at any ranker: which phrasings are kept is decided by their source alone
(every n-th, in file order).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

REPOS = {
    "AI-Agent-Hub/MCPToolBenchPP": "0c69e53fb01aa14f1f9d977446a7b5493c10ee56",
    "icip-cas/LiveMCPBench": "a928e57d1ee7a25579b9a7036030faffff72d15b",
    "tianhaolin1991/MCP-Manager": "516c411fbf7e39970a69653b1b630627c1082aac",
}
TOOLBENCH_FILES = ("data/finance/finance_0724_single_v3.json", "data/search/search_0725_single_v2.json",
                   "data/browser/browser_0724_single_v3.json", "data/file_system/filesystem_0723_single.json")
TOOLBENCH_PER_FILE = 40
MCPZERO_QUERIES = 100
LARGE, SMALL, EXTRA = 3000, 500, 100

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """A toolset id (``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``) from a server's name."""
    s = _UNSAFE.sub("-", text).strip("-._").lower()[:64] or "server"
    return s if s[0].isalnum() else f"s{s}"[:64]


def tool_key(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("_") or "tool"


def git_show(repo: Path, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout


def schema_of_parameters(params: dict[str, str]) -> dict[str, Any]:
    """MCP-Zero stores parameters as ``{"name": "(type) description"}`` (``(Optional, type)`` when
    optional), read from each server's README; back into the JSON Schema shape ``tools/list`` has."""
    props: dict[str, Any] = {}
    required = []
    for name, text in params.items():
        m = re.match(r"\s*\(([^)]*)\)\s*(.*)", str(text), re.S)
        kinds, desc = ([k.strip().lower() for k in m.group(1).split(",")], m.group(2)) if m else ([], str(text))
        optional = "optional" in kinds
        kind = next((k for k in kinds if k != "optional"), "string")
        kind = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
                "dict": "object", "array of strings": "array"}.get(kind, kind)
        if kind not in ("string", "integer", "number", "boolean", "array", "object"):
            kind = "string"
        props[name] = {"type": kind, "description": desc.strip()}
        if not optional:
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


class Catalog:
    def __init__(self, base: list[dict[str, Any]]) -> None:
        self.servers: list[dict[str, Any]] = []
        self.ids: set[str] = set()
        self.slugs = {s["server"] for s in base}
        self.base_names = {s["server"]: {t["name"] for t in s["tools"]} for s in base if s["server"] != "builtin"}
        self.count = sum(len(s["tools"]) for s in base)

    def duplicate_of(self, name: str, tool_names: set[str]) -> str | None:
        """The server of the 59 set this one copies, if any."""
        s = slug(name)
        for base, names in self.base_names.items():
            if s in (base, f"mcp-server-{base}", f"{base}-mcp", f"server-{base}") or \
                    len(names & tool_names) * 2 >= max(1, len(tool_names)):
                return base
        return None

    def base_ids(self, base: str, tool_names: set[str]) -> dict[str, str]:
        """{name: id in the 59 set} of the names a copy of ``base`` shares with it."""
        return {n: f"{base}:{n}" for n in tool_names & self.base_names[base]}

    def add_server(self, name: str, source: str, tools: list[dict[str, Any]], limit: int) -> dict[str, str]:
        """Adds up to ``limit`` total tools; answers {original tool name: tool id} of those added."""
        sid = slug(name)
        while sid in self.slugs:
            sid = f"{sid[:60]}-{len(self.slugs) % 1000}"
        server = {"server": sid, "title": name, "source": source, "tools": []}
        added: dict[str, str] = {}
        for t in tools:
            if self.count >= limit:
                break
            tid = f"{sid}:{tool_key(t['name'])}"
            if tid in self.ids:
                continue
            self.ids.add(tid)
            added[t["name"]] = tid
            server["tools"].append({"id": tid, "name": t["name"], "description": t.get("description") or "",
                                    "inputSchema": t.get("inputSchema") or {"type": "object"}})
            self.count += 1
        if server["tools"]:
            self.slugs.add(sid)
            self.servers.append(server)
        return added


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    args = ap.parse_args()
    repo = {name: args.mirror / name.replace("/", "+") / "repo" for name in REPOS}

    base = json.loads(gzip.decompress((HERE / "tools59.json.gz").read_bytes()))["servers"]
    cat = Catalog(base)
    phrasings: list[dict[str, Any]] = []
    from_toolbench(cat, repo, phrasings)
    from_livemcpbench(cat, repo, phrasings)
    set500 = [t["id"] for s in cat.servers for t in s["tools"]][:SMALL - 59]
    extra = from_mcp_zero(cat, repo, phrasings)

    assert cat.count == LARGE, cat.count
    assert len(extra) == EXTRA, len(extra)
    mm = "tianhaolin1991/MCP-Manager"
    out = {"servers": cat.servers, "extra": {"server": "new100", "title": "100 more MCP-Zero tools",
                                             "source": f"{mm}@{REPOS[mm][:12]} (MCP-Zero's MCP-tools)",
                                             "tools": extra},
           "set500": set500}
    (HERE / "catalog3000.json.gz").write_bytes(gzip.compress(
        json.dumps(out, indent=1, ensure_ascii=False, sort_keys=True).encode(), mtime=0))
    (HERE / "phrasings_large.json").write_text(json.dumps(
        {"about": "User requests from public MCP tool benchmarks with their gold tools (see README.md). "
                  "gold: the tools the request needs; each is a list of ids any one of which is right.",
         "phrasings": phrasings}, indent=1, ensure_ascii=False) + "\n")
    print(f"{cat.count} tools in {len(cat.servers)} servers (+59), {len(phrasings)} phrasings")


def from_toolbench(cat: Catalog, repo: dict[str, Path], phrasings: list[dict[str, Any]]) -> None:
    """MCPToolBench++: single-step queries, each with its gold tool and server."""
    tb = "AI-Agent-Hub/MCPToolBenchPP"
    tb_tools: dict[str, dict[str, dict[str, Any]]] = {}
    tb_queries: list[tuple[str, str, str, str]] = []
    for path in TOOLBENCH_FILES:
        rows = json.loads(git_show(repo[tb], REPOS[tb], path))
        for r in rows:
            by_name = {t["name"]: t for t in r["tools"]}
            for server, names in r["mcp_tools_dict"].items():
                for n in names:
                    if n in by_name:
                        tb_tools.setdefault(server, {})[n] = {
                            "name": n, "description": (by_name[n].get("description") or "").strip(),
                            "inputSchema": by_name[n].get("input_schema") or {"type": "object"}}
        step = max(1, len(rows) // TOOLBENCH_PER_FILE)
        for r in rows[::step][:TOOLBENCH_PER_FILE]:
            label = r["function_call_label"][0]
            tb_queries.append((r["query"], label["mcp_server"], label["name"], path))
    tb_ids: dict[tuple[str, str], str] = {}
    for server, tools in tb_tools.items():
        if (copied := cat.duplicate_of(server, set(tools))) is not None:
            tb_ids.update({(server, n): tid for n, tid in cat.base_ids(copied, set(tools)).items()})
            continue
        for n, tid in cat.add_server(server, f"{tb}@{REPOS[tb][:12]}", list(tools.values()), LARGE).items():
            tb_ids[(server, n)] = tid
    for q, server, n, path in tb_queries:
        if (server, n) in tb_ids:
            phrasings.append({"text": q, "gold": [[tb_ids[(server, n)]]], "source": f"MCPToolBench++ {path}"})



def from_livemcpbench(cat: Catalog, repo: dict[str, Path], phrasings: list[dict[str, Any]]) -> None:
    """LiveMCPBench: LiveMCPTool's servers, and the tasks whose every annotated tool is found."""
    lb = "icip-cas/LiveMCPBench"
    live_ids: dict[str, list[str]] = {}
    for entry in json.loads(git_show(repo[lb], REPOS[lb], "tools/LiveMCPTool/tools.json")):
        for key, listed in (entry.get("tools") or {}).items():
            tools = listed.get("tools") or []
            if not tools:
                continue
            if (copied := cat.duplicate_of(key, {t["name"] for t in tools})) is not None:
                for n, tid in cat.base_ids(copied, {t["name"] for t in tools}).items():
                    live_ids.setdefault(n, []).append(tid)
                continue
            for n, tid in cat.add_server(key, f"{lb}@{REPOS[lb][:12]}", tools, LARGE).items():
                live_ids.setdefault(n, []).append(tid)
    for task in json.loads(git_show(repo[lb], REPOS[lb], "annotated_data/all_annotations.json")):
        names = [re.sub(r"^\s*\d+[.)]\s*", "", line).strip().strip("`")
                 for line in task["Annotator Metadata"].get("Tools", "").splitlines() if line.strip()]
        gold = [live_ids[n] for n in dict.fromkeys(names) if n in live_ids]
        if names and len(gold) == len(dict.fromkeys(names)):
            phrasings.append({"text": task["Question"], "gold": gold,
                              "source": f"LiveMCPBench annotated_data/all_annotations.json {task['task_id']}"})


def from_mcp_zero(cat: Catalog, repo: dict[str, Path], phrasings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP-Zero's collection (as MCP-Manager republished it, without the embeddings), the servers of
    every 4th of MCP-Manager's evaluation queries first, then the rest in file order, up to 3,000;
    answers the next 100 tools (a server new to the sidecar)."""
    mm = "tianhaolin1991/MCP-Manager"
    zero = [json.loads(line) for line in git_show(repo[mm], REPOS[mm], "MCPManager/mcps/mcp_tools.jsonl").splitlines()
            if line.strip()]
    evals = [json.loads(line) for line in git_show(
        repo[mm], REPOS[mm], "python/data/eval/embedding_compare/new/embedding_bge_m3_results.jsonl").splitlines()
        if line.strip()]
    chosen = evals[::4][:MCPZERO_QUERIES]
    first = list(dict.fromkeys(e["target_server_name"] for e in chosen))
    order = sorted(zero, key=lambda s: (first.index(s["name"]) if s["name"] in first else len(first)))
    zero_ids: dict[tuple[str, str], str] = {}
    extra: list[dict[str, Any]] = []  # the next 100 tools: a server new to the sidecar
    for s in order:
        tools = [{"name": t["name"], "description": t.get("description") or "",
                  "inputSchema": schema_of_parameters(t.get("parameter") or {})} for t in s["tools"]]
        if cat.duplicate_of(s["name"], {t["name"] for t in tools}) is not None:
            continue
        if cat.count >= LARGE:
            names = {t["name"] for t in extra}
            extra += [t for t in tools if t["name"] not in names and not names.add(t["name"])][:EXTRA - len(extra)]
            continue
        for n, tid in cat.add_server(s["name"], f"{mm}@{REPOS[mm][:12]} (MCP-Zero's MCP-tools)", tools,
                                     LARGE).items():
            zero_ids[(s["name"], n)] = tid
    for e in chosen:
        tid = zero_ids.get((e["target_server_name"], e["target_tool_name"]))
        if tid:
            phrasings.append({"text": e["task"]["query"], "gold": [[tid]],
                              "source": "MCP-Manager python/data/eval/embedding_compare/new (MCP-Zero tools)"})

    return extra


if __name__ == "__main__":
    main()
