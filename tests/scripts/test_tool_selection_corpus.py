"""The tool-selection bench's corpus (scripts/data/tool_selection/): every file loads, the sets nest
(59 in 500 in 3,000), every definition is one a provider can send, and every request's gold tools
exist in the sets it is asked against."""

from __future__ import annotations

import tool_selection_corpus as corpus


def test_the_59_set_is_the_seven_servers_and_the_builtins_with_59_tools() -> None:
    servers = {s["server"]: len(s["tools"]) for s in corpus.servers59()}
    assert servers == {"everything": 15, "filesystem": 14, "memory": 9, "sequential-thinking": 1, "fetch": 1,
                       "git": 12, "time": 2, "builtin": 5}
    assert len(corpus.definitions(59)) == 59


def test_the_sets_nest_and_have_their_sizes() -> None:
    d59, d500, d3000 = (set(corpus.definitions(n)) for n in corpus.SIZES)
    assert (len(d59), len(d500), len(d3000)) == (59, 500, 3000)
    assert d59 < d500 < d3000


def test_ids_are_unique_and_every_definition_is_complete() -> None:
    ids = [t["id"] for s in corpus.catalog()["servers"] for t in s["tools"]]
    assert len(ids) == len(set(ids)) == 3000 - 59
    extra = corpus.catalog()["extra"]["tools"]
    assert len(extra) == len({t["name"] for t in extra}) == 100
    assert not {f"new100:{t['name']}" for t in extra} & set(ids)
    for tool in [*corpus.definitions(3000).values(), *extra]:
        assert tool["name"] and isinstance(tool["description"], str)
        assert tool["inputSchema"].get("type") == "object", tool["name"]


def test_every_gold_tool_exists_and_there_are_enough_requests() -> None:
    hand, large = corpus.phrasings("59"), corpus.phrasings("_large")
    assert len(hand) >= 120 and len(large) >= 200
    d59, d3000 = corpus.definitions(59), corpus.definitions(3000)
    for p in hand:
        assert p["text"].strip() and p["gold"]
        assert all(group and all(g in d59 for g in group) for group in p["gold"]), p
    for p in large:
        assert p["text"].strip() and p["gold"] and p["source"]
        assert all(group and all(g in d3000 for g in group) for group in p["gold"]), p
    # the 59 set is asked its own requests; a bigger set every request whose tools it holds
    assert len(corpus.phrasings_for(59)) == len(hand)
    assert len(corpus.phrasings_for(3000)) == len(hand) + len(large)
    assert len(hand) < len(corpus.phrasings_for(500)) < len(hand) + len(large)


def test_ids_round_trip_through_the_sidecars_naming() -> None:
    for cid in corpus.definitions(3000):
        assert corpus.corpus_id(corpus.sidecar_id(cid)) == cid
    assert corpus.sidecar_id("git:git_log") == "mcp:git~git:git_log"
    assert corpus.sidecar_id("read_file") == "read_file"


def test_scores() -> None:
    gold = [["a", "b"], ["c"]]
    assert corpus.recall_at(["x", "b", "c"], gold, 1) == 0
    assert corpus.recall_at(["b", "x", "c"], gold, 1) == 1  # one of two needed, judged on one
    assert corpus.recall_at(["x", "b", "c"], gold, 5) == 1
    assert corpus.recall_at(["x", "a", "y"], gold, 5) == 0.5
    assert corpus.reciprocal_rank(["x", "y", "c"], gold) == 1 / 3
    assert corpus.reciprocal_rank([], gold) == 0
    assert corpus.approx_tokens({"name": "n", "description": "d" * 400, "inputSchema": {}}) > 100
