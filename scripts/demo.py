"""A whole session against a fresh sidecar, narrated: what a desktop app sees over stdio.

Runs offline on a temporary data directory (pass --data-dir to keep it, -v to see the raw traffic).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.client import RemoteError, SidecarClient  # noqa: E402

BOLD, DIM, GREEN, RED, RESET = ("\033[1m", "\033[2m", "\033[32m", "\033[31m", "\033[0m") if sys.stdout.isatty() else ("",) * 5


def step(title: str) -> None:
    print(f"\n{BOLD}== {title}{RESET}")


def show(label: str, value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    print(f"   {label:<22} {text}")


async def run(data_dir: Path, verbose: bool) -> int:
    step(f"spawn `python -m sidecar --data-dir {data_dir}`")
    started = time.perf_counter()
    async with SidecarClient.spawn(data_dir, initialize=False) as sc:
        if verbose:
            sc.on_message = lambda m: print(f"   {DIM}<< {json.dumps(m)}{RESET}")
        init = await sc.request("initialize", {"clientInfo": {"name": "demo", "version": "1"}})
        show("first reply after", f"{(time.perf_counter() - started) * 1000:.0f} ms (spawn + initialize)")
        show("server", f"{init['serverInfo']['name']} {init['serverInfo']['version']}, "
                       f"protocol {init['protocolVersion']}")
        show("capabilities", init["capabilities"])

        step("ping")
        times = []
        for _ in range(200):
            t0 = time.perf_counter()
            await sc.request("ping")
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        show("200 pings", f"p50 {times[100]:.2f} ms, p99 {times[197]:.2f} ms (through this asyncio client)")

        step("what the process holds")
        info = await sc.request("debug/info")
        show("pid / rss", f"{info['pid']} / {info['rssBytes'] / 2**20:.1f} MiB")
        show("heavy modules loaded", info["heavyModulesLoaded"] or "none (mcp, pydantic, ... load on first use)")
        files = sorted(p.name for p in data_dir.iterdir())
        show("data dir", ", ".join(files))

        step("a chat whose files branch with the conversation")
        chat = (await sc.request("chats/create", {"title": "demo chat"}))["chat"]
        cid, root = chat["id"], Path(chat["workspacePath"])
        show("workspace", str(root))

        async def say(role: str, content: str, parent: str | None = None) -> dict:
            params = {"chatId": cid, "role": role, "content": content}
            if parent:
                params["parentId"] = parent
            return (await sc.request("chats/addMessage", params))["message"]

        async def files() -> str:
            listed = (await sc.request("workspace/files", {"chatId": cid}))["files"]
            return ", ".join(f"{f['path']} ({f['size']} B)" for f in listed) or "(empty)"

        question = await say("user", "Write hello.py")
        answer_a = await say("assistant", "Here it is, in English.")
        await sc.request("workspace/writeFile", {"chatId": cid, "path": "hello.py", "text": "print('hello')\n"})
        show("answer A wrote", await files())
        answer_b = await say("assistant", "Here it is, in French.", question["id"])
        show("answer B starts from", await files())
        await sc.request("workspace/writeFile", {"chatId": cid, "path": "hello.py", "text": "print('bonjour')\n"})
        await sc.request("workspace/writeFile", {"chatId": cid, "path": "README.md", "text": "# Bonjour\n"})
        show("answer B wrote", await files())
        await sc.request("chats/switchBranch", {"chatId": cid, "messageId": answer_a["id"]})
        show("switch to A, on disk", f"{(root / 'hello.py').read_text().strip()}; README.md "
                                     f"{'exists' if (root / 'README.md').exists() else 'is gone'}")
        await sc.request("chats/switchBranch", {"chatId": cid, "messageId": answer_b["id"]})
        show("switch to B, on disk", (root / "hello.py").read_text().strip())

        (root / "hello.py").write_text("print('bonjour, le monde')\n")  # as an editor would
        changed = await sc.wait_notification("workspace/changed", timeout=10)
        show("edited in an editor", f"workspace/changed {changed['params']['changed']}")
        history = (await sc.request("workspace/manifest", {"chatId": cid}))["manifest"]
        show("saved as version", f"{history['source']} {history['id'][:13]}…, previous kept as {history['parentId'][:13]}…")

        step("a toolset: install the App Builder example and run its tools in this chat")
        example = ROOT / "tests" / "fixtures" / "toolsets" / "app-builder"
        seen = await sc.request("toolsets/inspect", {"path": str(example)})
        show("inspect (dry run)", f"{len(seen['tools'])} tools, {len(seen['files'])} files, "
                                  f"warnings: {seen['warnings'] or 'none'}")
        toolset = (await sc.request("toolsets/import", {"path": str(example)}))["toolset"]
        show("installed", f"{toolset['id']} {toolset['version']} ({toolset['sourceType']}: edits reload live)")
        by_provider: dict[str, int] = {}
        for t in (await sc.request("tools/list"))["tools"]:
            by_provider[t["provider"]] = by_provider.get(t["provider"], 0) + 1
        show("tools/list", by_provider)

        async def run_tool(tool: str, args: dict) -> dict:
            t0 = time.perf_counter()
            tc = (await sc.request("tools/call", {"toolId": tool, "args": args, "chatId": cid}))["toolCall"]
            outcome = "ok" if tc["status"] == "success" else f"{tc['errorKind']}: {tc['error']}"
            show(tool, f"{outcome} in {(time.perf_counter() - t0) * 1000:.0f} ms")
            return tc

        poem = "the sea the sky the sea again and the sea"
        wrote = await run_tool("app-builder:write_file", {"path": "poem.txt", "content": poem})
        show("  render plan", wrote["renderPlan"])
        show("  files now", await files())
        stats = await run_tool("app-builder:word_stats", {"path": "poem.txt", "top": 2})
        plan = stats["renderPlan"]
        show("  result", stats["result"])
        show("  render plan", f"{plan['renderer']}: artifact …/{Path(plan['config']['artifact']).name}, "
                              f"data = $return")
        page = (await sc.request("tools/htmlPage", {"toolCallId": stats["id"]}))["html"]
        show("  tools/htmlPage", f"{len(page)} chars with window.__TOOL_DATA__ injected, for an iframe srcdoc")
        listed = await run_tool("run_command", {"command": "wc -w poem.txt"})
        show("  output", listed["result"]["output"].strip())
        missing = await run_tool("app-builder:read_file", {"path": "nope.txt"})
        show("  recorded", f"status {missing['status']}, workspace still snapshotted "
                           f"({missing['postManifestId'][:13]}…)")
        try:
            await sc.request("tools/call", {"toolId": "app-builder:word_stats", "args": {"path": 3}, "chatId": cid})
        except RemoteError as exc:
            show("bad arguments", f"{exc.code} {exc.message}")

        step("a long request reports progress")
        await sc.request("debug/sleep", {"ms": 300, "workDoneToken": "demo"})
        progress = [n["params"]["value"] for n in sc.notifications if n["method"] == "$/progress"]
        show("$/progress", " ".join(str(v.get("percentage", v["kind"])) for v in progress))

        step("the user cancels a request")
        slow = sc.expect("slow")
        await sc.send({"jsonrpc": "2.0", "id": "slow", "method": "debug/sleep", "params": {"ms": 60000}})
        t0 = time.perf_counter()
        await sc.notify("$/cancelRequest", {"id": "slow"})
        answer = await slow(5)
        show("answer", f"{answer['error']['code']} {answer['error']['message']} "
                       f"after {(time.perf_counter() - t0) * 1000:.1f} ms")

        step("the sidecar asks the UI something (server-to-client request)")
        sc.handle("ui/confirmSomething", lambda params: {"decision": "allowOnce"})
        show("UI answered", await sc.request("debug/roundTrip", {
            "method": "ui/confirmSomething", "params": {"question": "run it?"}}))

        step("broken input never takes it down")
        for raw in (b"this is not json", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]'):
            await sc.send_raw(raw)
            err = (await sc.next_orphan())["error"]
            show(raw.decode()[:20], f"{err['code']} {err['message']}")
        try:
            await sc.request("debug/raise")
        except RemoteError as exc:
            show("handler crash", f"{exc.code} errorId {exc.data['errorId']} (traceback only in the log)")
        show("still serving", await sc.request("ping"))

        step("shutdown + exit")
        await sc.request("shutdown")
        await sc.notify("exit")
        code = await sc.wait_exit()
        show("exit code", f"{GREEN if code == 0 else RED}{code}{RESET}")
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="keep the data here instead of a temp dir")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every message received")
    args = parser.parse_args()
    if args.data_dir:
        return anyio.run(run, args.data_dir.absolute(), args.verbose)
    with tempfile.TemporaryDirectory(prefix="sidecar-demo-") as tmp:
        return anyio.run(run, Path(tmp) / "data", args.verbose)


if __name__ == "__main__":
    raise SystemExit(main())
