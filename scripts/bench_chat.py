#!/usr/bin/env python3
"""Benchmark chat turns (issue "Chat turns") on the offline scripted provider, with references
measured in the same run.

    .venv/bin/python scripts/bench_chat.py             full run
    .venv/bin/python scripts/bench_chat.py --quick     smaller run (a smoke test)

Budget from ARCHITECTURE.md: "streamed text: coalesced (about 30 ms or 2 KB a notification); no
database write per token". Every part runs through one real sidecar (``SidecarClient.spawn`` on a
fresh temp data dir, stopped with ``shutdown`` + ``exit``, which must exit 0). Each turn gets its
own scripted provider (``providers/set {kind: "scripted", config: {script: [...]}}``) so its script
starts from the first reply.

1. Streaming: one turn whose scripted reply is a text of T words (T = 20,000 full, 5,000 quick),
   one word a delta (``chunk`` 1), each delta stamped by the provider with ``@<time.monotonic_ns()>@``
   (``stamp``: CLOCK_MONOTONIC is shared by the processes of one Linux machine). Two variants:
   ``delayMs`` 0.2 (paced: the provider sleeps before each delta, and asyncio's epoll wait rounds
   such a sleep up to 1 ms, so about 1.2 ms a delta: ~25 s for 20,000 tokens, still far faster than
   a real model) and ``delayMs`` 0 (as fast as the turn can take them: the 2 KB cap does the work).
   - notifications sent: how many ``chat/event`` textDelta arrived for the message, and tokens per
     notification (every stamp found in them is one token; the text without the stamps must be
     exactly the scripted text, and ``seq`` must have no gap);
   - added latency: for every stamp, ``time.monotonic_ns()`` taken first thing in the client's
     ``on_notification`` callback minus the stamp, p50 / p99 / max. It includes the coalescing
     window (a token waits up to ~30 ms for the ones after it), the JSON encoding, the pipe and the
     client's own JSON parse. Reference: ``ping`` round trip p50 through the same client.
   - database write transactions during the turn: ``debug/info`` dbTransactions after minus before
     (the user and assistant messages, checkpoints, the final write).
   Judged PASS when notifications <= tokens / 10 and db transactions during the turn <= 10 plus
   one per 2 s of streaming (the turn saves its message every 2 s, so a crash keeps the text).
   Then one more delayMs 0 turn with the 10 ms pinger of part 3 running: the longest ping shows how
   long the stream held the sidecar's event loop. With delayMs 0 the scripted provider never sleeps,
   so the turn only lets other work run when a notification has to wait for the pipe to the client
   (a client slow to read makes this figure smaller): it varies from run to run.         (info)
2. Tool steps: one turn whose first scripted reply asks for 10 ``write_file`` calls (small files)
   and whose second reply is "done"; turn wall time (``chat/send`` request -> response), the sum of
   the tools' own durations (``toolCallFinished`` events: finishedAt - startedAt, ISO timestamps with
   microseconds), and the time per tool step beyond the tool itself = (wall - sum) / 10; median over
   N turns (N = 5 full, 2 quick; each in a fresh chat, after one unmeasured turn). Reference: the same
   10 ``write_file`` calls made directly with ``tools/call {toolId, args, chatId}`` one after another
   in a fresh chat, wall / 10 (median over the same N rounds, interleaved with the turns); its own
   cost beyond the tools is shown too.                                                   (info)
3. Ten chats at once: 10 concurrent ``chat/send``, each a scripted reply of W words (W = 3,000
   full, 1,000 quick) with ``delayMs`` 1, while a separate task sends ``ping`` every 10 ms (the next
   one goes 10 ms after the previous one was sent, or at once when its answer took longer);
   ping p50 / p99 / max while the turns run. Reference: the same pinger with no turn running, for
   as long (same client, same run).                                  budget: ping p99 < 50 ms

Latencies of pings use ``time.perf_counter``. The script exits 0 even when a budget is missed: it
is a report; misses are marked ``FAIL``.
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import Rows, misses_line, pct, print_header, print_table, run_in_temp_dir  # noqa: E402 (after the sys.path set-up above)

from sidecar.client import SidecarClient  # noqa: E402 (after the sys.path set-up above)

PYTHON = sys.executable

TOKENS_PER_NOTIFICATION_MIN = 10  # PASS when notifications <= tokens / 10
BASE_DB_TRANSACTIONS = 10  # start, end and a few steps of one turn
CHECKPOINT_EVERY_S = 2.0  # sidecar/chat/turns.py saves a long stream's message this often


def max_transactions(wall_s: float) -> int:
    return BASE_DB_TRANSACTIONS + int(wall_s / CHECKPOINT_EVERY_S)
BUDGET_PING_P99_MS = 50.0
TOOL_STEPS = 10
CONCURRENT_CHATS = 10
PING_EVERY = 0.010

STAMP = re.compile(r"@(\d+)@")


def words(n: int, tag: str = "w") -> str:
    """n distinct-looking words, separated by single spaces (and a newline now and then)."""
    return "".join(f"{tag}{i}{chr(10) if i % 16 == 15 else ' '}" for i in range(n))


def iso_seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


class Turns:
    """Every chat/event the client's read loop hands over, with its receipt time (monotonic ns)."""

    def __init__(self, client: SidecarClient) -> None:
        self.client = client
        self.by_chat: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        client.on_notification = self._on

    def _on(self, message: dict[str, Any]) -> None:
        t = time.monotonic_ns()  # first thing: the receipt time
        if message.get("method") == "chat/event":
            params = message["params"]
            self.by_chat.setdefault(params["chatId"], []).append((t, params))
        # The client keeps every notification in .notifications too; this bench does not need them
        # (a 20,000-token turn would keep its whole text twice).
        self.client.notifications.clear()

    def events(self, chat_id: str, message_id: str) -> list[tuple[int, dict[str, Any]]]:
        return [(t, p) for t, p in self.by_chat.get(chat_id, []) if p["messageId"] == message_id]


async def new_chat(sc: SidecarClient, title: str) -> str:
    return (await sc.request("chats/create", {"title": title}))["chat"]["id"]


async def scripted(sc: SidecarClient, provider_id: str, *script: dict[str, Any]) -> str:
    await sc.request("providers/set", {"id": provider_id, "kind": "scripted", "config": {"script": list(script)}})
    return provider_id


async def db_transactions(sc: SidecarClient) -> int:
    return int((await sc.request("debug/info"))["dbTransactions"])


async def send(sc: SidecarClient, chat_id: str, content: str, provider: str) -> dict[str, Any]:
    turn = await sc.request("chat/send", {"chatId": chat_id, "content": content, "provider": provider},
                            timeout=600)
    if turn["stopReason"] != "endTurn":
        raise RuntimeError(f"the turn stopped with {turn['stopReason']}: {turn.get('error')}")
    return turn


def check_seq(evs: list[tuple[int, dict[str, Any]]]) -> None:
    seqs = [p["seq"] for _, p in evs]
    if seqs != list(range(1, len(seqs) + 1)):
        raise RuntimeError(f"chat/event seq has gaps or is out of order: {seqs[:20]}...")
    if not evs or evs[-1][1]["event"]["kind"] != "messageCompleted":
        raise RuntimeError("the turn's last event is not messageCompleted")


async def pings(sc: SidecarClient, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await sc.request("ping")
        out.append((time.perf_counter() - t0) * 1000)
    return out


# ---------------------------------------------------------------------------------------------
# 1. Streaming


async def bench_stream(sc: SidecarClient, turns: Turns, n_tokens: int, delay_ms: float, name: str) -> dict:
    text = words(n_tokens)
    chat_id = await new_chat(sc, f"stream {name}")
    provider = await scripted(sc, f"stream-{name}", {"text": text, "chunk": 1, "stamp": True, "delayMs": delay_ms})
    before = await db_transactions(sc)
    t0 = time.perf_counter()
    turn = await send(sc, chat_id, "stream please", provider)
    wall = time.perf_counter() - t0
    after = await db_transactions(sc)

    evs = turns.events(chat_id, turn["messageId"])
    check_seq(evs)
    deltas = [(t, p["event"]["text"]) for t, p in evs if p["event"]["kind"] == "textDelta"]
    latencies: list[float] = []
    plain: list[str] = []
    for t, chunk in deltas:
        latencies.extend((t - int(s)) / 1e6 for s in STAMP.findall(chunk))
        plain.append(STAMP.sub("", chunk))
    if "".join(plain) != text:
        raise RuntimeError(f"the streamed text differs from the script ({len(''.join(plain))} vs {len(text)} chars)")
    if len(latencies) != n_tokens:
        raise RuntimeError(f"{len(latencies)} stamps received for {n_tokens} tokens")
    sizes = [len(c.encode()) for _, c in deltas]
    return {"name": name, "delay_ms": delay_ms, "tokens": len(latencies), "notifications": len(deltas),
            "events": len(evs), "latency": latencies, "db": after - before, "wall": wall,
            "max_bytes": max(sizes), "mean_bytes": statistics.mean(sizes)}


async def stall_during_fast_stream(sc: SidecarClient, n_tokens: int) -> tuple[list[float], float]:
    """Pings every 10 ms around a delayMs-0 turn: does the stream starve the event loop?"""
    chat_id = await new_chat(sc, "stream fast + pings")
    provider = await scripted(sc, "stream-fast-pinged", {"text": words(n_tokens), "chunk": 1, "stamp": True})
    out: list[float] = []
    stop = anyio.Event()
    wall = 0.0
    async with anyio.create_task_group() as tg:
        tg.start_soon(pinger, sc, out, stop)
        await anyio.sleep(0.05)
        t0 = time.perf_counter()
        await send(sc, chat_id, "stream please", provider)
        wall = time.perf_counter() - t0
        await anyio.sleep(0.05)
        stop.set()
    return out, wall


# ---------------------------------------------------------------------------------------------
# 2. Tool steps


def tool_script(tag: str) -> list[dict[str, Any]]:
    calls = [{"tool": "write_file", "args": {"path": f"{tag}/f{k}.txt", "content": f"file {k} of {tag}\n"}}
             for k in range(TOOL_STEPS)]
    return [{"text": f"Writing {TOOL_STEPS} files.\n", "toolCalls": calls}, {"text": "done"}]


async def tool_turn(sc: SidecarClient, turns: Turns, tag: str) -> dict:
    chat_id = await new_chat(sc, f"tools {tag}")
    provider = await scripted(sc, f"tools-{tag}", *tool_script(tag))
    before = await db_transactions(sc)
    t0 = time.perf_counter()
    turn = await send(sc, chat_id, f"write {TOOL_STEPS} files", provider)
    wall = time.perf_counter() - t0
    after = await db_transactions(sc)
    evs = turns.events(chat_id, turn["messageId"])
    check_seq(evs)
    calls = [p["event"]["toolCall"] for _, p in evs if p["event"]["kind"] == "toolCallFinished"]
    if len(calls) != TOOL_STEPS or any(c["status"] != "success" for c in calls):
        outcomes = [(c["status"], c.get("error")) for c in calls]
        raise RuntimeError(f"expected {TOOL_STEPS} successful tool calls, got {outcomes}")
    own = sum(iso_seconds(c["finishedAt"]) - iso_seconds(c["startedAt"]) for c in calls)
    files = (await sc.request("workspace/files", {"chatId": chat_id}))["files"]
    if len(files) != TOOL_STEPS:
        raise RuntimeError(f"expected {TOOL_STEPS} files in the workspace, got {len(files)}")
    return {"wall": wall * 1000, "own": own * 1000, "step": (wall - own) * 1000 / TOOL_STEPS, "db": after - before}


async def direct_calls(sc: SidecarClient, tag: str) -> dict:
    chat_id = await new_chat(sc, f"direct {tag}")
    calls = [c["args"] for c in tool_script(tag)[0]["toolCalls"]]
    own = 0.0
    t0 = time.perf_counter()
    for args in calls:
        call = (await sc.request("tools/call", {"toolId": "write_file", "args": args, "chatId": chat_id}))["toolCall"]
        if call["status"] != "success":
            raise RuntimeError(f"tools/call write_file failed: {call}")
        own += iso_seconds(call["finishedAt"]) - iso_seconds(call["startedAt"])
    wall = time.perf_counter() - t0
    return {"per_call": wall * 1000 / TOOL_STEPS, "beyond": (wall - own) * 1000 / TOOL_STEPS}


async def bench_tools(sc: SidecarClient, turns: Turns, rounds: int) -> dict:
    await tool_turn(sc, turns, "warm")  # not measured: first turn, first snapshot paths
    await direct_calls(sc, "warm")
    out: dict[str, list] = {"turns": [], "direct": []}
    for r in range(rounds):
        out["turns"].append(await tool_turn(sc, turns, f"r{r}"))
        out["direct"].append(await direct_calls(sc, f"d{r}"))
    return out


# ---------------------------------------------------------------------------------------------
# 3. Ten chats at once, and a pinger


async def pinger(sc: SidecarClient, out: list[float], stop: anyio.Event) -> None:
    next_at = time.perf_counter()
    while not stop.is_set():
        t0 = time.perf_counter()
        await sc.request("ping")
        out.append((time.perf_counter() - t0) * 1000)
        next_at = max(next_at + PING_EVERY, time.perf_counter())
        await anyio.sleep(max(0.0, next_at - time.perf_counter()))


async def bench_concurrent(sc: SidecarClient, turns: Turns, n_words: int) -> dict:
    chats = [await new_chat(sc, f"busy {i}") for i in range(CONCURRENT_CHATS)]
    text = words(n_words)
    providers = [await scripted(sc, f"busy-{i}", {"text": text, "chunk": 1, "delayMs": 1})
                 for i in range(CONCURRENT_CHATS)]
    results: list[tuple[str, dict[str, Any]]] = []
    loaded: list[float] = []
    stop = anyio.Event()
    t0 = time.perf_counter()

    async def one(chat_id: str, provider: str) -> None:
        results.append((chat_id, await send(sc, chat_id, "stream please", provider)))

    async with anyio.create_task_group() as outer:
        outer.start_soon(pinger, sc, loaded, stop)
        async with anyio.create_task_group() as tg:
            for chat_id, provider in zip(chats, providers, strict=True):
                tg.start_soon(one, chat_id, provider)
        stop.set()
    wall = time.perf_counter() - t0

    notifications = 0
    for chat_id, turn in results:
        evs = turns.events(chat_id, turn["messageId"])
        check_seq(evs)
        got = "".join(p["event"]["text"] for _, p in evs if p["event"]["kind"] == "textDelta")
        if got != text:
            raise RuntimeError(f"chat {chat_id}: the streamed text differs from the script")
        notifications += len(evs)

    # Reference: the same pinger, no turn running, for as long (at most 10 s).
    idle: list[float] = []
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(pinger, sc, idle, stop)
        await anyio.sleep(min(wall, 10.0))
        stop.set()
    return {"loaded": loaded, "idle": idle, "wall": wall, "notifications": notifications,
            "tokens": CONCURRENT_CHATS * n_words}


# ---------------------------------------------------------------------------------------------
# Report


async def run_all(args: argparse.Namespace, tmp: Path) -> dict:
    out: dict[str, Any] = {}
    async with SidecarClient.spawn(tmp / "data", client_name="bench_chat") as sc:
        turns = Turns(sc)
        await pings(sc, 50)  # warm-up
        out["ping"] = await pings(sc, args.pings)
        out["stream"] = [await bench_stream(sc, turns, args.tokens, 0.2, "paced"),
                         await bench_stream(sc, turns, args.tokens, 0, "fast")]
        out["stall"] = await stall_during_fast_stream(sc, args.tokens)
        out["tools"] = await bench_tools(sc, turns, args.rounds)
        out["concurrent"] = await bench_concurrent(sc, turns, args.words)
        info = await sc.request("debug/info")
        out["rss"] = info["rssBytes"]
        out["exit"] = await sc.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer tokens and turns (smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.tokens, args.rounds, args.words, args.pings = 5_000, 2, 1_000, 200
    else:
        args.tokens, args.rounds, args.words, args.pings = 20_000, 5, 3_000, 500

    t_start = time.perf_counter()
    res = run_in_temp_dir("bench_chat-", run_all, args)
    wall = time.perf_counter() - t_start

    med = statistics.median
    rows = Rows()
    add = rows.add

    ping50 = pct(res["ping"], 50)
    ping_ref = f"{ping50:.3f} ms ping p50"
    for s in res["stream"]:
        took = f"{s['wall']:.1f} s" if s["wall"] >= 1 else f"{s['wall'] * 1000:.0f} ms"
        label = f"stream {s['tokens']:,} tokens, delayMs {s['delay_ms']:g} ({took})"
        tokens, notes = s["tokens"], s["notifications"]
        add(f"{label}: textDelta notifications",
            f"{notes:,} ({tokens / notes:.0f} tok/notif)", "-",
            f"<= tokens/{TOKENS_PER_NOTIFICATION_MIN} = {tokens // TOKENS_PER_NOTIFICATION_MIN:,}",
            notes <= tokens / TOKENS_PER_NOTIFICATION_MIN)
        add("  notification size, mean / max", f"{s['mean_bytes']:.0f} / {s['max_bytes']:,} B", "-",
            "~2 KB", None)
        limit = max_transactions(s["wall"])
        add("  db write transactions during the turn", f"{s['db']}", "-", f"<= {limit}", s["db"] <= limit)
        lat = s["latency"]
        add("  provider delta -> client receipt, p50", f"{pct(lat, 50):.2f} ms", ping_ref, "-", None)
        add("  provider delta -> client receipt, p99 / max",
            f"{pct(lat, 99):.2f} / {max(lat):.2f} ms", ping_ref, "-", None)

    stall, stall_wall = res["stall"]
    add(f"  ping every 10 ms during another delayMs 0 turn ({stall_wall * 1000:.0f} ms): max (n={len(stall)})",
        f"{max(stall):.1f} ms",
        f"{pct(res['ping'], 99):.2f} ms ping p99", "-", None)

    t = res["tools"]
    turns, direct = t["turns"], t["direct"]
    n = len(turns)
    direct_per = med([d["per_call"] for d in direct])
    add(f"turn with {TOOL_STEPS} write_file calls: wall, median (n={n})",
        f"{med([x['wall'] for x in turns]):.1f} ms",
        f"{direct_per * TOOL_STEPS:.1f} ms direct tools/call x{TOOL_STEPS}",
        "-", None)
    add("  sum of the tools' own durations, median", f"{med([x['own'] for x in turns]):.1f} ms", "-", "-", None)
    add("  per tool step beyond the tool itself, median", f"{med([x['step'] for x in turns]):.2f} ms",
        f"{direct_per:.2f} ms tools/call wall/{TOOL_STEPS}", "-", None)
    add("  direct tools/call: per call beyond the tool itself, median", "-",
        f"{med([d['beyond'] for d in direct]):.2f} ms", "-", None)
    add("  db write transactions during the turn, median", f"{med([x['db'] for x in turns]):.0f}", "-", "-", None)

    c = res["concurrent"]
    loaded, idle = c["loaded"], c["idle"]
    add(f"{CONCURRENT_CHATS} chats streaming at once ({c['tokens']:,} tokens, {c['wall']:.1f} s): ping p50 "
        f"(n={len(loaded)})", f"{pct(loaded, 50):.2f} ms", f"{pct(idle, 50):.2f} ms idle (n={len(idle)})", "-", None)
    add("  ping p99", f"{pct(loaded, 99):.2f} ms", f"{pct(idle, 99):.2f} ms idle",
        f"< {BUDGET_PING_P99_MS:.0f} ms", pct(loaded, 99) < BUDGET_PING_P99_MS)
    add("  ping max", f"{max(loaded):.2f} ms", f"{max(idle):.2f} ms idle", "-", None)
    add("  chat/event notifications, all chats", f"{c['notifications']:,}", "-", "-", None)

    print_header(PYTHON)
    print(f"mode     {'--quick' if args.quick else 'full'}  stream {args.tokens:,} tokens (chunk 1, stamped); "
          f"{args.rounds} tool turns of {TOOL_STEPS} write_file; {CONCURRENT_CHATS} chats x {args.words:,} words "
          f"(delayMs 1) with a ping every {PING_EVERY * 1000:.0f} ms; {args.pings} reference pings")
    print(f"rule     streaming PASS when textDelta notifications <= tokens/{TOKENS_PER_NOTIFICATION_MIN} and "
          f"db write transactions during the turn <= {BASE_DB_TRANSACTIONS} + one per "
          f"{CHECKPOINT_EVERY_S:g} s of streaming "
          f"(ARCHITECTURE.md: coalesced, ~30 ms or 2 KB a notification; no database write per token)")
    print()
    print_table(rows)
    print(f"sidecar RSS at the end: {res['rss'] / 2**20:.1f} MB (debug/info rssBytes); "
          f"exit code after shutdown + exit: {res['exit']}")
    print(misses_line(rows, *([f"sidecar exit code {res['exit']}"] if res["exit"] != 0 else [])))
    print(f"wall time: {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
