"""A whole session against a fresh sidecar, narrated: what a desktop app sees over stdio.

Lifecycle, ping, a chat whose files branch, the App Builder toolset, a card, an MCP server's secret,
a remote MCP server signed in with OAuth (a local authorization server), HTTP tools against a
local server, then a chat turn on the
offline scripted model (streamed text printed as it arrives, tool calls with their render plans, a
``ui/confirmToolCall`` answered ``allowChat``), a retry on a new branch and a switch back, the
kill switch stopping a running tool, and the right tools chosen among the real definitions of the
seven MCP servers people install first (typo-tolerant search, ranking by meaning, a turn's offer).

Runs offline on a temporary data directory (pass --data-dir to keep it, -v to see the raw traffic).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.client import RemoteError, SidecarClient  # noqa: E402 (after the sys.path set-up above)

_ESCAPES = ("\033[1m", "\033[2m", "\033[32m", "\033[31m", "\033[0m")
BOLD, DIM, GREEN, RED, RESET = _ESCAPES if sys.stdout.isatty() else ("",) * 5


def step(title: str) -> None:
    print(f"\n{BOLD}== {title}{RESET}")


def show(label: str, value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    print(f"   {label:<22} {text}")


async def write_through_a_link(sc: SidecarClient, cid: str, root: Path, victim: Path) -> None:
    """A tool (or anything) leaves a link in the workspace pointing at a file of the user's."""
    (root / "notes.md").symlink_to(victim)
    try:
        await sc.request("workspace/writeFile", {"chatId": cid, "path": "notes.md", "text": "pwned"})
    except RemoteError as exc:
        show("write through a link", f"refused ({exc.code}): {exc.message[:90]}…")
    else:
        show("write through a link", "NOT refused: this build writes through links")
    (root / "notes.md").unlink()


async def upload_demo(sc: SidecarClient, cid: str) -> None:
    """A folder uploaded with progress reports, and a device refused."""
    with tempfile.TemporaryDirectory(prefix="demo-upload-") as picked:  # a folder the user picks
        photos = Path(picked) / "photos"
        photos.mkdir()
        for n in range(3):
            (photos / f"img{n}.jpg").write_bytes(bytes([n]) * (400 << 10))
        seen_before = len(sc.notifications)
        uploaded = await sc.request("workspace/upload", {"chatId": cid, "paths": [str(photos)], "dest": "in",
                                                         "workDoneToken": "upload-1"})
    kinds = [n["params"]["value"]["kind"] for n in sc.notifications[seen_before:]
             if n.get("method") == "$/progress" and n["params"]["token"] == "upload-1"]
    show("uploaded a folder", f"added {uploaded['added']}; $/progress {' '.join(kinds)} "
                              "(copied outside the chat's lock)")
    try:
        await sc.request("workspace/upload", {"chatId": cid, "paths": ["/dev/zero"]})
    except RemoteError as exc:
        show("upload /dev/zero", f"refused {exc.code}: {exc.message}")


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
        show("data dir", ", ".join(sorted(os.listdir(data_dir))))
        box = info["sandbox"]
        show("tool sandbox", f"{box['mechanism']} (limits: {box['limits']})"
             + (f" - {box['warning']}" if box.get("warning") else ""))

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
        show("saved as version",
             f"{history['source']} {history['id'][:13]}…, previous kept as {history['parentId'][:13]}…")

        await write_through_a_link(sc, cid, root, data_dir / "sidecar.db")
        await upload_demo(sc, cid)

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
        for q in ("word", "file", "ile", "+=*NEAR("):
            found = (await sc.request("tools/search", {"q": q, "pageSize": 4}))["hits"]
            show(f"tools/search {q!r}", ", ".join(f"{h['tool']['id']} ({h['match']})" for h in found) or "no hits")

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
        at = page.index("<script>window.__TOOL_DATA__")
        where = "before </head>" if page.startswith("</head>", page.index("</script>", at) + 9) else f"at char {at}"
        show("  tools/htmlPage", f"{len(page)} chars with window.__TOOL_DATA__ injected {where} (the first one a "
                                 "browser reads as a tag), for an iframe srcdoc")
        listed = await run_tool("run_command", {"command": "wc -w poem.txt"})
        show("  output", listed["result"]["output"].strip())
        missing = await run_tool("app-builder:read_file", {"path": "nope.txt"})
        show("  recorded", f"status {missing['status']}, workspace still snapshotted "
                           f"({missing['postManifestId'][:13]}…)")
        try:
            await sc.request("tools/call", {"toolId": "app-builder:word_stats", "args": {"path": 3}, "chatId": cid})
        except RemoteError as exc:
            show("bad arguments", f"{exc.code} {exc.message}")

        step("delete a toolset softly: gone from every list, changes refused, restored as it was")
        await sc.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file",
                                               "nameOverride": "Open File"})
        deleted = (await sc.request("toolsets/delete", {"id": "app-builder"}))["toolset"]
        shown = (await sc.request("tools/list", {"toolsetIds": ["app-builder"], "includeDisabled": True}))["tools"]
        show("deleted", f"softDeletedAt {deleted['softDeletedAt']}; its tools in tools/list: {len(shown)}")
        try:
            await sc.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file", "enabled": False})
        except RemoteError as exc:
            show("a change inside it", f"{exc.code} {exc.message}")
        await sc.request("toolsets/restore", {"id": "app-builder"})
        back = (await sc.request("tools/get", {"id": "app-builder:read_file"}))["tool"]
        show("restored", f"{back['id']} is {back['name']!r} again, status {back['status']} "
                         "(the reaper would have removed it after 2 days)")

        step("output checks: a result that breaks the tool's return annotation fails the call, naming the place")
        await sc.request("toolsets/import", {"path": str(ROOT / "tests" / "fixtures" / "toolsets" / "checked")})
        schema = (await sc.request("tools/get", {"id": "checked:report"}))["tool"]["outputSchema"]
        show("  outputSchema", f"from `-> Report`: {schema['$ref']}, with {', '.join(sorted(schema['$defs']))}")
        await run_tool("checked:report", {"rows": "12"})
        await run_tool("checked:report", {"rows": "many"})
        step("an override pattern: one override for every matching tool, the exact one still wins")
        matched = (await sc.request("tools/setOverride", {"toolsetId": "checked", "toolId": "*",
                                                          "requiresConfirmation": True}))["matched"]
        show("  checked:*", f"applies to {', '.join(t['id'] for t in matched)}")
        await sc.request("tools/setOverride", {"toolsetId": "checked", "toolId": "report",
                                               "requiresConfirmation": False})
        report = (await sc.request("tools/get", {"id": "checked:report"}))["tool"]
        show("  checked:report", f"requiresConfirmation {report['requiresConfirmation']}, "
                                 f"overridesApplied {report['overridesApplied']}")

        step("a card: a tool answers with {text, html, title?} and the user sees a sanitised card")
        await sc.request("toolsets/import", {"path": str(ROOT / "tests" / "fixtures" / "toolsets" / "cards")})
        weather = await run_tool("cards:weather", {"location": "Valletta"})
        card = weather["renderPlan"]["config"]
        show("  card", f"{card['title']!r}, accent {card['accentColor']}, background {card['backgroundColor']}")
        show("  html from the tool", weather["result"]["html"])
        show("  html in the plan", f"{card['html']}  (script, handlers and position:fixed gone)")
        broken = await run_tool("cards:broken", {})
        show("  {error} in a result", f"status {broken['status']}: {broken['error']}")

        step("a tool on a schedule: its output becomes a message in the chat and starts a turn")
        try:
            await sc.request("schedules/create", {"toolId": "cards:weather", "cron": "30 2 31 2 *"})
        except RemoteError as exc:
            show("a cron that never fires", f"{exc.code} {exc.data['reason']}")
        made = (await sc.request("schedules/create", {
            "toolId": "cards:weather", "args": {"location": "Valletta"}, "cron": "0 7 * * 1-5", "chatId": cid,
            "timezone": "Europe/Malta", "prompt": "Tell me what to wear today, given this forecast:"}))["schedule"]
        show("schedules/create", f"{made['cron']} = {made['explained']} ({made['timezone']}), next {made['nextRunAt']}")
        ran = (await sc.request("schedules/runNow", {"id": made["id"]}))["toolCall"]
        fired = await sc.wait_notification("schedules/fired", lambda p: p["scheduleId"] == made["id"])
        show("schedules/runNow", f"tool call {ran['status']}; the chat is sent:")
        show("", fired["params"]["message"].replace("\n", " / ")[:110])
        await sc.wait_notification("chat/event", lambda p: p["chatId"] == cid
                                   and p["event"]["kind"] == "messageCompleted")
        show("a turn ran", "the scripted model answered in the chat (chat/event notifications)")

        await secret_for_a_server(sc)
        await servers_from_other_apps(sc, data_dir)
        await oauth_sign_in(sc)

        await what_a_server_says(sc)

        await configured_tool(sc)
        await sandbox_settings(sc)
        await sandboxed_server(sc, data_dir)

        await http_tools(sc)

        await url_import(sc)

        await chat_session(sc)

        await kill_switch(sc)

        await audit_trail(sc, data_dir)

        await catalog_pages(sc)

        await tool_selection(sc, data_dir)

        step("secrets are masked by meaning (a careless MCP server prints what it was given)")
        careless = "import os, sys; print(*sys.argv[1:], os.environ['API_TOKEN'], file=sys.stderr); sys.exit(2)"
        added = (await sc.request("mcpServers/add", {
            "id": "careless", "command": sys.executable,
            "args": ["-c", careless, "--token", "tok-demo-41f7", "--region=eu"],
            "env": {"API_TOKEN": "env-demo-93c2", "LOG_LEVEL": "debug"}}))["server"]
        show("command shown", " ".join(added["command"][3:]))
        failed = await sc.wait_notification("mcpServers/status", lambda p: p["server"]["status"] == "error")
        show("its stderr, relayed", failed["params"]["server"]["error"].splitlines()[-1])
        await sc.request("mcpServers/remove", {"id": "careless"})

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


# -- the kill switch (seed 004 "Safety Guardrails") --------------------------------------------------

async def kill_switch(sc: SidecarClient) -> None:
    step("the kill switch: every tool off at once, the running one stopped, chats go on without tools")
    cid = (await sc.request("chats/create", {"title": "Kill switch"}))["chat"]["id"]
    slow = sc.expect("sleeper")
    await sc.send({"jsonrpc": "2.0", "id": "sleeper", "method": "tools/call",
                   "params": {"toolId": "run_command", "args": {"command": "sleep 30"}, "chatId": cid}})
    for _ in range(1000):  # until the command runs (debug/info counts what the switch would stop)
        if (await sc.request("debug/info"))["toolsRunning"]:
            break
        await anyio.sleep(0.01)
    show("running", "run_command `sleep 30`")
    t0 = time.perf_counter()
    await sc.request("settings/set", {"toolsEnabled": False})
    stopped = (await slow(10))["result"]["toolCall"]
    show("settings/set", f"toolsEnabled false -> the call ended after {(time.perf_counter() - t0) * 1000:.0f} ms: "
                         f"{stopped['status']} ({stopped['errorKind']})")
    note = next(n for n in sc.notifications if n["method"] == "settings/changed")
    show("settings/changed", note["params"])
    try:
        await sc.request("tools/call", {"toolId": "list_files", "args": {}, "chatId": cid})
    except RemoteError as exc:
        show("tools/call", f"{exc.code} {exc.message}")
    turn = await sc.request("chat/send", {"chatId": cid, "content": '/tool list_files {}'})
    got = await sc.request("chats/get", {"id": cid})
    reply = next(m for m in got["messages"] if m["id"] == turn["messageId"])
    show("a chat turn", f"stopReason {turn['stopReason']}; its tool call: {reply['toolCalls'][0]['errorKind']} "
                        "(the model was offered no tools and told they are off)")
    await sc.request("settings/set", {"toolsEnabled": True})
    show("switched on again", (await sc.request("settings/get"))["settings"])


# -- a tool that needs configuration (seed 004) ---------------------------------------------------

async def configured_tool(sc: SidecarClient) -> None:
    step("a toolset that needs an API key: per-tool configuration and tool status")
    weather = ROOT / "tests" / "fixtures" / "toolsets" / "weather"
    await sc.request("toolsets/import", {"path": str(weather)})

    async def statuses() -> str:
        tools = (await sc.request("tools/list"))["tools"]
        return ", ".join(f"{t['id']} {t['status']}" for t in tools if t.get("toolsetId") == "weather")

    show("tools/list", await statuses())
    try:
        await sc.request("tools/call", {"toolId": "weather:forecast", "args": {"city": "Valletta"}})
    except RemoteError as exc:
        show("call before set-up", f"{exc.code} {exc.message}")
    await sc.request("config/set", {"toolsetId": "weather", "values": {"api_key": "demo-key-1234"}})
    await sc.request("config/set", {"toolsetId": "weather", "toolId": "forecast", "values": {"units": "metric"}})
    fields = (await sc.request("config/get", {"toolsetId": "weather"}))["fields"]
    show("config/get", ", ".join(f"{f['key']}={f.get('value', f.get('default'))}" for f in fields))
    show("config/test", (await sc.request("config/test", {"toolsetId": "weather", "toolId": "forecast"}))["message"])
    show("tools/list", await statuses())
    context = {"timezone": "Europe/Malta", "locale": "en-MT", "city": "Valletta", "country": "Malta"}
    call = (await sc.request("tools/call", {"toolId": "weather:forecast", "args": {"city": "Mdina"},
                                            "clientContext": context}))["toolCall"]
    result = call["result"]
    show("the tool read", f"settings {result['keys']} (a {result['keyLength']}-character key), "
                          f"telemetry city {result['telemetry']['city']}, time {result['telemetry']['time']}")
    await sc.request("config/delete", {"toolsetId": "weather", "key": "api_key"})
    show("config/delete api_key", f"the key leaves the secret store; {await statuses()}")


async def sandbox_settings(sc: SidecarClient) -> None:
    step("sandbox settings: the manifest's limits, warned about before install, the user's over them")
    bundle = ROOT / "tests" / "fixtures" / "toolsets" / "sandbox-settings"
    seen = await sc.request("toolsets/inspect", {"path": str(bundle)})
    for line in (w for w in seen["warnings"] if "sandbox-settings:" in w):
        show("inspect warns", line)
    await sc.request("toolsets/import", {"path": str(bundle)})
    limits = (await sc.request("tools/get", {"id": "sandbox-settings:quick"}))["tool"]["limits"]
    show("tools/get limits", f"{limits['timeoutSeconds']:g} s ({limits['sources']['timeoutSeconds']}), "
                             f"{limits['memoryBytes'] >> 20} MiB ({limits['sources']['memoryBytes']}), "
                             f"network {limits['network']} {limits['allowedHosts']}")
    call = (await sc.request("tools/call", {"toolId": "sandbox-settings:quick", "args": {"seconds": 3}}))["toolCall"]
    show("a 3 s nap under its 1 s", f"{call['status']}, errorKind {call['errorKind']}: {call['error']}")
    tool = (await sc.request("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "quick",
                                                   "constraints": {"timeoutSeconds": 5}}))["tool"]
    won = tool["limits"]
    show("the user's 5 s wins", f"{won['timeoutSeconds']:g} s ({won['sources']['timeoutSeconds']})")
    call = (await sc.request("tools/call", {"toolId": "sandbox-settings:quick", "args": {"seconds": 0.2}}))["toolCall"]
    show("a short nap", f"{call['status']}, {call['result']}")


async def sandboxed_server(sc: SidecarClient, data_dir: Path) -> None:
    step("an MCP server the user puts in the OS sandbox: it cannot read the sidecar's database")
    hostile = ROOT / "tests" / "fixtures" / "mcp" / "hostile.py"
    await sc.request("mcpServers/add", {"id": "boxed", "command": sys.executable, "args": [str(hostile)],
                                        "cwd": str(hostile.parent), "sandbox": {}})
    async def boxed() -> dict[str, Any]:
        return next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == "boxed~boxed")

    with anyio.fail_after(30):
        while (shown := await boxed())["status"] == "connecting":  # noqa: ASYNC110 - a poll of the list, as a UI would
            await anyio.sleep(0.05)
    show("mcpServers/list", f"{shown['status']}, sandbox {shown.get('sandbox')}, confinedBy {shown.get('confinedBy')}")
    if shown["status"] == "connected":
        call = (await sc.request("tools/call", {"toolId": "mcp:boxed~boxed:read",
                                                "args": {"path": str(data_dir / "sidecar.db")}}))["toolCall"]
        show("it reads sidecar.db", call["result"]["content"][0]["text"])
    await sc.request("mcpServers/remove", {"id": "boxed"})


# -- HTTP tools (issue 13) against a local server -------------------------------------------------

async def http_tools(sc: SidecarClient) -> None:
    step("HTTP tools: templated REST calls, against a local inventory API this demo starts")
    from tests.http_server import HttpServer, inventory  # a real HTTP/1.1 server on 127.0.0.1

    with inventory(HttpServer()) as server:
        await sc.request("toolsets/import", {"path": str(ROOT / "tests" / "fixtures" / "toolsets" / "http_example")})
        await sc.request("config/set", {"toolsetId": "http_example", "values": {"api_host": server.netloc}})
        key = "demo-api-key-7c41"
        await sc.request("secrets/set", {"name": "EXAMPLE_API_KEY", "value": key})

        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            return (await sc.request("tools/call", {"toolId": f"http_example:{tool}", "args": args}))["toolCall"]

        got = await call("get_item", {"id": "1"})
        seen = server.requests[-1]
        show("get_item {id: 1}", f"{got['status']}: {got['result']}  (GET {seen.target}, X-Api-Key from the "
                                 f"secret store: {'sent' if seen.header('X-Api-Key') == key else 'missing'})")
        got = await call("search_items", {"q": "de"})
        show("search_items {q: de}", f"{got['result']}  (GET {server.requests[-1].target})")
        got = await call("get_item", {"id": "../admin?x=1"})
        show("id: ../admin?x=1", f"GET {server.requests[-1].target} -> {got['errorKind']}: {got['error']}")
        await sc.request("config/set", {"toolsetId": "http_example", "toolId": "my_orders",
                                        "values": {"user": "ada", "password": "pw-demo-5e"}})
        got = await call("my_orders", {})
        show("my_orders (2 steps)", f"POST /login (form), then GET /orders with its token: {got['result']}")
        got = await call("item_note", {"id": "2"})
        show("item_note (text)", f"{got['result']!r}  (the key went in the URL; the log shows it as ****)")
        await user_made_toolset(sc, server.netloc)


async def user_made_toolset(sc: SidecarClient, netloc: str) -> None:
    step("a toolset made in the UI: put an HTTP tool under a slug, then run it from the \"+\" palette")
    made = (await sc.request("toolsets/create", {"id": "my-shop", "name": "My shop"}))["toolset"]
    show("toolsets/create my-shop", f"sourceType {made['sourceType']}, created {made['createdAt']}")
    definition = {"description": "One item of the inventory", "tags": ["inventory"],
                  "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                  "http": {"urlTemplate": f"http://{netloc}/items/${{id}}", "allowedHosts": ["127.0.0.1"],
                           "headers": {"X-Api-Key": "${EXAMPLE_API_KEY}"}, "response": {"select": "/item"}}}
    tool = (await sc.request("tools/put", {"toolsetId": "my-shop", "slug": "item", "version": "1",
                                           "definition": definition}))["tool"]
    show("tools/put +item@1", f"id {tool['id']}, tags {tool['tags']}")
    try:
        await sc.request("tools/put", {"toolsetId": "my-shop", "slug": "get_item", "version": "1",
                                       "definition": definition})
    except RemoteError as exc:
        show("slug get_item", exc.data["reason"])
    chat = (await sc.request("chats/create", {"title": "palette"}))["chat"]["id"]
    ran = await sc.request("chat/invokeTool", {"chatId": chat, "toolId": "+item", "args": {"id": "1"}})
    show("+item {id: 1}", f"{ran['toolCall']['status']}: {ran['toolCall']['result']}  ({ran['message']['content']})")


# -- a toolset installed from a URL, checked for an update and upgraded (issue 14 part 4) -----------

async def url_import(sc: SidecarClient) -> None:
    step("a toolset from a URL: installed, checked for a newer bundle, upgraded in place")
    from tests.http_server import HttpServer, Response  # a real HTTP/1.1 server on 127.0.0.1
    from tests.toolsets.url_bundles import bundle, serve_bundle, sha

    with HttpServer() as server:  # plain http is allowed from this machine only; anything else needs https
        v1 = bundle("1.0.0")
        url = serve_bundle(server, "/inventory.zip", v1, etag='"v1"')
        got = (await sc.request("toolsets/import", {"url": url, "sha256": sha(v1)}))["toolset"]
        show("toolsets/import {url, sha256}", f"{got['id']} {got['version']}, sourceType {got['sourceType']}, "
                                              f"sourceRef {got['sourceRef']}")
        await sc.request("tools/setOverride", {"toolsetId": "inventory", "toolId": "inventory:get_item",
                                               "nameOverride": "Look up an item"})
        check = await sc.request("toolsets/checkUpdate", {"id": "inventory"})
        show("toolsets/checkUpdate", f"updateAvailable {check['updateAvailable']} (the server answered "
                                     f"{'304 to its ETag' if check['notModified'] else 'the same bundle'})")
        serve_bundle(server, "/inventory.zip", bundle("2.0.0", extra_tool=True), etag='"v2"')
        check = await sc.request("toolsets/checkUpdate", {"id": "inventory"})
        show("  after a new release", f"updateAvailable {check['updateAvailable']}: "
                                      f"{check['currentVersion']} -> {check['availableVersion']}")
        done = await sc.request("toolsets/upgrade", {"id": "inventory"})
        tools = (await sc.request("toolsets/get", {"id": "inventory"}))["tools"]
        show("toolsets/upgrade", f"{done['previousVersion']} -> {done['toolset']['version']}; tools "
                                 f"{', '.join(repr(t['name']) for t in tools)} (the user's name kept)")
        server.route("GET", "/moved", Response(302, headers={"Location": "https://169.254.169.254/latest"}))
        try:
            await sc.request("toolsets/import", {"url": server.url + "/moved"})
        except RemoteError as exc:
            show("a redirect to cloud metadata", f"{exc.code} {exc.message}")
        await sc.request("toolsets/uninstall", {"id": "inventory"})


# -- a whole chat session on the offline scripted model --------------------------------------------

PAGE = "<!doctype html>\n<title>Hello</title>\n<h1 id=greeting>Hello</h1>\n<script src=app.js></script>\n"
APP = "document.getElementById('greeting').textContent += ', ' + new Date().toDateString();\n"
ONE_FILE = "<!doctype html>\n<title>Hello</title>\n<h1>Hello</h1>\n<script>document.title += '!'</script>\n"
PACE = {"delayMs": 15}  # a word every 15 ms, so the streaming shows

# What the "model" says, one reply per model call: the first turn takes two (tool calls, then an
# answer), the retry takes the other two.
SCRIPT = [
    {**PACE, "text": "Sure. I'll write the page and its script, count the page's words,\n"
                     "then check the sizes with a command.\n",
     "toolCalls": [{"tool": "write_file", "args": {"path": "index.html", "content": PAGE}},
                   {"tool": "write_file", "args": {"path": "app.js", "content": APP}},
                   {"tool": "app-builder:word_stats", "args": {"path": "index.html", "top": 3}},
                   {"tool": "run_command", "args": {"command": "wc -c index.html app.js"}}],
     "usage": {"inputTokens": 310, "outputTokens": 42}},
    {**PACE, "text": "Done: index.html loads app.js, which adds today's date to the greeting.",
     "usage": {"inputTokens": 520, "outputTokens": 14}},
    {**PACE, "text": "Another take: everything in one file this time.\n",
     "toolCalls": [{"tool": "write_file", "args": {"path": "hello.html", "content": ONE_FILE}}],
     "usage": {"inputTokens": 300, "outputTokens": 20}},
    {**PACE, "text": "Done: hello.html has the markup and its script inline.",
     "usage": {"inputTokens": 380, "outputTokens": 11}},
]


class TurnPrinter:
    """Prints a turn's chat/event notifications as they arrive: text live, tool steps on their lines."""

    INDENT = " " * 26

    def __init__(self) -> None:
        self.mid_line = False  # text was printed and its line is not finished
        self.started: dict[str, float] = {}

    def __call__(self, message: dict[str, Any]) -> None:
        if message.get("method") != "chat/event":
            return
        event = message["params"]["event"]
        kind = event["kind"]
        if kind == "textDelta":
            self.text(event["text"])
        elif kind == "messageStarted":
            self.text("", label=f"assistant ({event['provider']})")
        elif kind == "toolCallStarted":
            call = event["toolCall"]
            self.started[call["id"]] = time.perf_counter()
            self.line(f"{DIM}▶ {event['toolName']}{RESET} {_args_text(call['args'])}")
        elif kind == "toolCallFinished":
            call = event["toolCall"]
            took = (time.perf_counter() - self.started.pop(call["id"], time.perf_counter())) * 1000
            if call["status"] == "success":
                outcome = f"{GREEN}ok{RESET}"
            else:
                outcome = f"{RED}{call['errorKind']}{RESET}: {call['error']}"
            plan = call.get("renderPlan") or {}
            renderer = f", render plan: {plan['renderer']}" if plan else ""
            self.line(f"{DIM}◀ {call['toolId']}{RESET} {outcome} in {took:.0f} ms{renderer}{_plan_detail(plan)}")
            result = call.get("result")
            if isinstance(result, dict) and isinstance(result.get("output"), str):
                output = " | ".join(line.strip() for line in result["output"].splitlines())
                self.line(f"  {DIM}output:{RESET} {output}")
        elif kind == "messageCompleted":
            self.end()
        elif kind == "error":
            self.line(f"{RED}error{RESET} {event['message']}")

    def text(self, text: str, label: str | None = None) -> None:
        if label is not None:
            self.end()
            print(f"   {label:<22} ", end="")
            self.mid_line = True
        elif not self.mid_line:
            print(self.INDENT, end="")
            self.mid_line = True
        body, newline, rest = text.rpartition("\n")
        if newline:  # lines it finishes, and what starts the next one
            print(body.replace("\n", "\n" + self.INDENT) + "\n", end="")
            self.mid_line = False
            if rest:
                print(self.INDENT + rest, end="")
                self.mid_line = True
        else:
            print(rest, end="")
        sys.stdout.flush()

    def line(self, text: str) -> None:
        self.end()
        print(f"{self.INDENT}{text}", flush=True)

    def end(self) -> None:
        if self.mid_line:
            print(flush=True)
            self.mid_line = False


def _args_text(args: dict[str, Any]) -> str:
    shown = {k: (v if not isinstance(v, str) or len(v) <= 40 else f"<{len(v)} chars>") for k, v in args.items()}
    return json.dumps(shown, ensure_ascii=False)


def _plan_detail(plan: dict[str, Any]) -> str:
    config = plan.get("config") or {}
    if "file" in config:
        return f" ({config['file']})"
    if "artifact" in config:
        return f" (…/{Path(config['artifact']).name})"
    return ""


async def secret_for_a_server(sc: SidecarClient) -> None:
    step("a secret for an MCP server: set it, and the waiting server connects (no restart)")

    async def settled(start: int, *wanted: str) -> dict:
        """The server's first status among `wanted` in the notifications from index `start` on."""

        def found() -> dict | None:
            return next((n["params"]["server"] for n in sc.notifications[start:] if n["method"] == "mcpServers/status"
                         and n["params"]["server"]["id"] == "greeter~greeter"
                         and n["params"]["server"]["status"] in wanted), None)

        return await sc.wait_for(found, timeout=30)

    fixture = ROOT / "tests" / "fixtures" / "mcp" / "basic.py"
    mark = len(sc.notifications)
    await sc.request("mcpServers/add", {"id": "greeter", "command": sys.executable, "args": [str(fixture)],
                                        "env": {"FIXTURE_ECHO_PREFIX": "${DEMO_GREETING}"}})
    waiting = await settled(mark, "error", "connected")
    show("mcpServers/add", f"{waiting['status']}: {waiting.get('error')}")
    mark = len(sc.notifications)
    await sc.request("secrets/set", {"name": "DEMO_GREETING", "value": "a secret says hello to"})
    listed = await sc.request("secrets/list")
    show("secrets/list", f"backend {listed['backend']}: " + ", ".join(
        f"{x['name']} {x['masked']} used by {x['usedBy']}" for x in listed["secrets"]))
    connected = await settled(mark, "connected", "error")
    show("the server", connected["status"])
    done = (await sc.request("tools/call", {"toolId": "mcp:greeter~greeter:echo", "args": {"text": " the world"}}))
    show("its echo tool", done["toolCall"]["result"]["content"][0]["text"])
    # Edited in place: a confirmation default changes nothing running; a new environment restarts it.
    mark = len(sc.notifications)
    edited = (await sc.request("mcpServers/update", {"id": "greeter", "requiresConfirmation": True,
                                                     "env": {"FIXTURE_ECHO_PREFIX": "edited, hello to"}}))["server"]
    show("mcpServers/update", f"env {edited['env']}, asks first: {edited['requiresConfirmation']}")
    await settled(mark, "connected", "error")
    done = (await sc.request("tools/call", {"toolId": "mcp:greeter~greeter:echo", "args": {"text": " the world"}}))
    show("its echo tool", done["toolCall"]["result"]["content"][0]["text"])
    await sc.request("secrets/delete", {"name": "DEMO_GREETING"})  # a keystore keeps entries beyond the demo
    await sc.request("mcpServers/remove", {"id": "greeter~greeter"})


async def servers_from_other_apps(sc: SidecarClient, data_dir: Path) -> None:
    step("servers people already run: a VS Code workspace's mcp.json (JSONC, an ${input:}, a shell line) imported")
    project = data_dir.parent / "a-project"
    (project / ".vscode").mkdir(parents=True, exist_ok=True)
    fixture = ROOT / "tests" / "fixtures" / "mcp" / "basic.py"
    (project / ".vscode" / "mcp.json").write_text("""{
  // VS Code writes comments and trailing commas
  "inputs": [{"type": "promptString", "id": "greeting", "description": "What the server says", "password": true}],
  "servers": {
    "greeter": {"type": "stdio", "command": "@PY@ @SERVER@", "env": {"FIXTURE_ECHO_PREFIX": "${input:greeting}"},},
  },
}""".replace("@PY@", sys.executable).replace("@SERVER@", str(fixture)))
    found = await sc.request("mcpServers/importPreview", {"path": str(project / ".vscode" / "mcp.json"),
                                                         "project": str(project)})
    for f in found["servers"]:
        show(f"found {f['id']} ({f['source']})", f"command split into {len(f['command'])} words; asks for secret "
             f"{[i['name'] for i in f['inputs']]}")
    name = found["servers"][0]["inputs"][0]["name"]
    await sc.request("secrets/set", {"name": name, "value": "imported, hello to"})
    mark = len(sc.notifications)
    done = await sc.request("mcpServers/import", {"ids": [f["id"] for f in found["servers"]],
                                                  "path": str(project / ".vscode" / "mcp.json"),
                                                  "project": str(project)})
    key = done["servers"][0]["id"]
    def settled() -> dict | None:
        return next((n["params"]["server"] for n in sc.notifications[mark:] if n["method"] == "mcpServers/status"
                     and n["params"]["server"]["id"] == key
                     and n["params"]["server"]["status"] in ("connected", "error")), None)

    server = await sc.wait_for(settled, timeout=30)
    show("mcpServers/import", f"{key}: {server['status']}")
    listed = next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == key)
    names = listed["envNames"]
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    show("what it gets (names only)", ", ".join(names[:6]) + more)
    try:
        await sc.request("mcpServers/update", {"id": key, "envPassthrough": ["OPENAI_API_KEY"]})
    except RemoteError as exc:
        show("envPassthrough OPENAI_API_KEY", f"refused ({exc.code}): {exc.message[:90]}...")
    done = await sc.request("tools/call", {"toolId": f"mcp:{key}:echo", "args": {"text": " the world"}})
    show("its echo tool", done["toolCall"]["result"]["content"][0]["text"])
    await sc.request("mcpServers/remove", {"id": key})
    await sc.request("secrets/delete", {"name": name})


async def what_a_server_says(sc: SidecarClient) -> None:
    step("what an MCP server says about its tools: hints set confirmation, pictures get a plan, logs reach the UI")
    fixture = ROOT / "tests" / "fixtures" / "mcp" / "meta.py"
    await sc.request("mcpServers/add", {"id": "notes", "command": sys.executable, "args": [str(fixture)],
                                        "logLevel": "warning"})
    await sc.wait_notification("mcpServers/status", lambda p: p["server"]["id"] == "notes~notes"
                               and p["server"]["status"] in ("connected", "error"), timeout=30)
    tools = {t["id"].rpartition(":")[2]: t for t in (await sc.request("tools/list"))["tools"]
             if t["id"].startswith("mcp:notes~notes:")}
    for name in ("list_notes", "delete_note", "fetch_page", "add_note"):
        t = tools[name]
        show(name, f"{json.dumps(t.get('annotations'))} -> {'asks' if t['requiresConfirmation'] else 'runs'}")
    picture = (await sc.request("tools/call", {"toolId": "mcp:notes~notes:picture", "args": {}}))["toolCall"]
    show("picture's renderPlan", picture["renderPlan"])
    # Run from the "+" palette in a chat, the picture goes to the model with the next turn.
    cid = (await sc.request("chats/create", {"title": "a picture"}))["chat"]["id"]
    await sc.request("chat/invokeTool", {"chatId": cid, "toolId": "mcp:notes~notes:picture", "args": {}})
    await sc.request("providers/set", {"id": "demo-echo", "kind": "scripted",
                                       "config": {"script": [{"echoContext": True}]}})
    turn = await sc.request("chat/send", {"chatId": cid, "content": "what is it?", "provider": "demo-echo"})
    reply = next(m for m in (await sc.request("chats/get", {"id": cid}))["messages"] if m["id"] == turn["messageId"])
    ran = next(m["content"] for m in json.loads(reply["content"]) if "picture" in m["content"])
    show("palette run -> model", next(line for line in ran.splitlines() if line.startswith("[image")))
    await sc.request("chats/delete", {"id": cid})
    await sc.request("providers/remove", {"id": "demo-echo"})
    mark = len(sc.notifications)
    await sc.request("tools/call", {"toolId": "mcp:notes~notes:chatter", "args": {"count": 4}})
    logged = await sc.wait_for(
        lambda: [n["params"] for n in sc.notifications[mark:] if n["method"] == "mcpServers/log"])
    show("mcpServers/log", f"{logged[0]['level']} {logged[0]['data']} (debug and info are below its logLevel)")
    await sc.request("mcpServers/remove", {"id": "notes~notes"})


async def oauth_sign_in(sc: SidecarClient) -> None:
    step("a remote MCP server that needs OAuth: needsAuth, then mcpServers/login through the UI")
    from urllib.parse import urlsplit

    import httpx2  # the HTTP client the sidecar's MCP side uses; only this step needs it here

    from tests.procs import served  # a fixture server in its own process group

    fixture = ROOT / "tests" / "fixtures" / "mcp" / "oauth_server.py"
    async with served([sys.executable, str(fixture)], quiet=True) as words:
        url = f"http://127.0.0.1:{int(words[1])}/mcp"

        async def browser(params: dict[str, Any]) -> dict[str, Any]:
            page = urlsplit(params["url"])
            show("ui/openUrl", f"{params['reason']}: {page.scheme}://{page.netloc}{page.path}?...")
            async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as client:
                landed = await client.get(params["url"])  # the user clicks allow; the page redirects home
            show("the browser", f"{landed.status_code} on {urlsplit(str(landed.url)).netloc} (the sidecar's loopback)")
            return {"opened": True}

        sc.handle("ui/openUrl", browser)
        await sc.request("mcpServers/add", {"id": "hosted", "type": "streamable-http", "url": url})
        note = await sc.wait_notification("mcpServers/status", lambda p: p["server"]["id"] == "hosted~hosted" and
                                          p["server"]["status"] in ("needsAuth", "connected", "error"), timeout=30)
        server = note["params"]["server"]
        show("mcpServers/add", f"{server['status']}: {server.get('error')}")
        server = (await sc.request("mcpServers/login", {"id": "hosted~hosted"}, timeout=60))["server"]
        show("mcpServers/login", f"{server['status']}, {server['toolCount']} tool (tokens in the secret store)")
        done = await sc.request("tools/call", {"toolId": "mcp:hosted~hosted:echo", "args": {"text": "signed in"}})
        show("its echo tool", done["toolCall"]["result"]["content"][0]["text"])
        await sc.request("mcpServers/logout", {"id": "hosted~hosted"})
        await sc.request("mcpServers/remove", {"id": "hosted~hosted"})


async def chat_session(sc: SidecarClient) -> None:
    step("a chat turn on the offline scripted model: streamed text, tools, a confirmation")
    await sc.request("providers/set", {"id": "demo-model", "kind": "scripted", "config": {"script": SCRIPT}})
    show("providers/set", f"demo-model (scripted: {len(SCRIPT)} replies, a word every {PACE['delayMs']} ms)")
    chat = (await sc.request("chats/create", {"title": "hello page"}))["chat"]
    cid = chat["id"]

    async def files() -> str:
        listed = (await sc.request("workspace/files", {"chatId": cid}))["files"]
        return ", ".join(f"{f['path']} ({f['size']} B)" for f in listed) or "(empty)"

    def confirm(params: dict[str, Any]) -> dict[str, Any]:
        printer.line(f"{BOLD}? ui/confirmToolCall{RESET}  may {params['toolName']} run "
                     f"{_args_text(params['args'])}?")
        printer.line(f"{BOLD}→ allowChat{RESET}            (the UI's answer: yes, and don't ask again in this chat)")
        return {"decision": "allowChat"}

    printer = TurnPrinter()
    sc.on_notification = printer
    sc.handle("ui/confirmToolCall", confirm)
    try:
        question = "Make me a hello page, with its script in a separate file."
        show("user", question)
        t0 = time.perf_counter()
        first = await sc.request("chat/send", {"chatId": cid, "content": question, "provider": "demo-model"})
        printer.end()
        usage = first.get("usage") or {}
        took = (time.perf_counter() - t0) * 1000
        show("chat/send answered", f"stopReason {first['stopReason']} after {took:.0f} ms, "
                                   f"usage {usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out")
        show("branch A files", await files())

        step("retry the answer on a new branch, then switch back")
        retry_text = "Try again, all in one file."
        show("user (retry)", f"{retry_text}  {DIM}(parentId = the first question){RESET}")
        retry = await sc.request("chat/send", {"chatId": cid, "content": retry_text, "provider": "demo-model",
                                               "parentId": first["userMessageId"]})
        printer.end()
        show("chat/send answered", f"stopReason {retry['stopReason']}")
        show("branch B files", f"{await files()}  (it started from the files before answer A)")
        got = await sc.request("chats/get", {"id": cid})
        _print_tree(got["messages"], got["chat"]["activeLeafId"])

        switched = (await sc.request("chats/switchBranch", {"chatId": cid, "messageId": first["messageId"]}))["chat"]
        on_a = "is" if switched["activeLeafId"] == first["messageId"] else "is not"
        show("chats/switchBranch", f"to answer A (active leaf {on_a} answer A)")
        show("branch A files", await files())
        offered = (await sc.request("tools/list", {"chatId": cid}))["tools"]
        show("tools/list {chatId}", f"{len(offered)} tools this chat's model is offered, as the chat names them: "
                                    + ", ".join(t["name"] for t in offered[:3]) + ", …")
        root = Path(switched["workspacePath"])
        show("on disk", ", ".join(sorted(name for name in os.listdir(root) if not name.startswith("."))))
    finally:
        sc.on_notification = None


async def audit_trail(sc: SidecarClient, data_dir: Path) -> None:
    step("the audit trail: every tool call so far, who started it and how it was confirmed")
    page = await sc.request("toolCalls/list", {"pageSize": 6})
    for c in page["toolCalls"]:
        how = f", {c['confirmation']}" if c.get("confirmation") else ""
        took = f"{c['durationMs']:.1f} ms" if "durationMs" in c else "never ran"
        args = _args_text(c["args"])[:60]
        outcome = f"{c['status']} ({c['errorKind']})" if "errorKind" in c else c["status"]
        show(f"  {c['startedBy']}{how}", f"{c['toolId']} {outcome}, {took}  {DIM}{args}{RESET}")
    denied = await sc.request("toolCalls/list", {"status": "error", "pageSize": 100})
    show("toolCalls/list {status: error}", f"{len(denied['toolCalls'])} failed or refused calls")
    with tempfile.TemporaryDirectory(prefix="demo-export-") as folder:  # never in the data directory
        out = Path(folder) / "tool-calls.csv"
        done = await sc.request("toolCalls/export", {"path": str(out)})
        size = out.stat().st_size
        show("toolCalls/export", f"{done['count']} calls to {out.name} ({done['format']}, {size:,} bytes)")
    refused = await sc.request_raw("toolCalls/export", {"path": str(data_dir / "sidecar.db")})
    show("  onto the database?", f"{refused['error']['code']} {refused['error']['data']['reason']}")


async def catalog_pages(sc: SidecarClient) -> None:
    step("the tool catalog a page at a time, every provider by id, with how often each tool ran")
    first = await sc.request("tools/list", {"pageSize": 4})
    show("tools/list {pageSize: 4}", ", ".join(t["id"] for t in first["tools"]) + " …")
    second = await sc.request("tools/list", {"pageSize": 4, "pageToken": first["nextPageToken"]})
    show("  the next page", ", ".join(t["id"] for t in second["tools"]) + " …")
    used: list[dict[str, Any]] = []
    token: str | None = None
    while True:  # every page, as a UI sorting by usage would
        page = await sc.request("tools/list", {"pageSize": 500, "includeDisabled": True}
                                | ({"pageToken": token} if token else {}))
        used += [t for t in page["tools"] if t.get("callCount")]
        if (token := page.get("nextPageToken")) is None:
            break
    top = sorted(used, key=lambda t: -t["callCount"])[:4]
    show("most used", ", ".join(f"{t['id']} ×{t['callCount']} ({t['provider']})" for t in top))
    mine = (await sc.request("tools/list", {"toolsetIds": ["app-builder"]}))["tools"]
    show("tools/list {toolsetIds}", f"{len(mine)} tools of app-builder")
    wrong = await sc.request_raw("tools/list", {"pageToken": first["nextPageToken"], "toolsetIds": ["x"]})
    show("  token of other filters", f"{wrong['error']['code']} {wrong['error']['message'][:70]}")


CORPUS = ROOT / "scripts" / "data" / "tool_selection" / "tools59.json.gz"


async def tool_selection(sc: SidecarClient, data_dir: Path) -> None:
    step("the right tools at any scale: the 59 tools of the seven MCP servers people install first")
    # Their real definitions (listed from the servers themselves), installed as HTTP toolsets:
    # nothing here is called, only searched, ranked and offered.
    servers = json.loads(gzip.decompress(CORPUS.read_bytes()))["servers"]
    for server in servers:
        if server["server"] == "builtin":
            continue
        folder = data_dir.parent / "corpus" / server["server"]
        folder.mkdir(parents=True, exist_ok=True)
        tools = [{"id": t["name"], "description": t.get("description") or t["name"],
                  "input_schema": t.get("inputSchema") or {"type": "object"},
                  "http": {"urlTemplate": "https://api.example.com/x", "allowedHosts": ["api.example.com"]}}
                 for t in server["tools"]]
        (folder / "toolset.yaml").write_text(json.dumps({  # JSON is YAML
            "manifest_version": "1", "id": server["server"], "name": server["server"], "version": "1.0.0",
            "description": f"the tools {server['source']} lists", "tools": tools}))
        await sc.request("toolsets/import", {"path": str(folder)})
    total = len((await sc.request("tools/list", {"pageSize": 500}))["tools"])
    show("installed", f"{sum(len(x['tools']) for x in servers if x['server'] != 'builtin')} tools of "
                      f"the seven servers: {total} enabled tools in all with the built-ins and the demo's")
    for q in ("comit my chnages", "what time is it in tokyo"):
        hits = (await sc.request("tools/search", {"q": q, "pageSize": 3}))["hits"]
        show(f"tools/search {q!r}", "; ".join(
            f"{h['tool']['id']} ({h['match']}"
            + "".join(f", {m['query']}→{m['term']}" for m in h.get("matched", []) if m["query"] != m["term"])
            + ")" for h in hits))
    ranked = await sc.request("tools/relevant", {"text": "what did I change in my repo since yesterday?",
                                                  "limit": 3})
    show("tools/relevant", f"ranked by {ranked['ranking']}" + (f" ({ranked['fallbackReason']})"
                                                                if ranked.get("fallbackReason") else ""))
    for t in ranked["tools"]:
        show(f"  {t['score']:.2f}", f"{t['tool']['id']}: {t['why']}")
    offered: list[dict[str, Any]] = []

    def on_event(message: dict[str, Any]) -> None:
        event = (message.get("params") or {}).get("event") or {}
        if message.get("method") == "chat/event" and event.get("kind") == "toolsOffered":
            offered.append(event)

    sc.on_notification = on_event
    try:
        cid = (await sc.request("chats/create", {"title": "tool selection"}))["chat"]["id"]
        for selection in ("all", "auto"):
            await sc.request("chats/update", {"id": cid, "toolSettings": {"toolSelection": selection}})
            await sc.request("chat/send", {"chatId": cid, "content": "what time is it in Tokyo right now?"})
            event = offered[-1]
            show(f"a turn in {selection!r}", f"{len(event['toolIds'])} tools offered ({event['reason']}), "
                                             f"~{event.get('tokens', 0):,} tokens of definitions, "
                                             f"{event['deferred']} deferred" + (", + find_tools" if event.get(
                                                 "findTools") else ""))
        show("  offered", ", ".join(offered[-1]["toolIds"][:8]) + ", …")
    finally:
        sc.on_notification = None


def _print_tree(messages: list[dict[str, Any]], active_leaf: str | None) -> None:
    children: dict[str | None, list[dict[str, Any]]] = {}
    for m in messages:
        children.setdefault(m.get("parentId"), []).append(m)

    lines: list[str] = []

    def walk(parent: str | None, prefix: str) -> None:
        kids = children.get(parent, [])
        for i, m in enumerate(kids):
            last = i == len(kids) - 1
            first_line = (m["content"].splitlines() or [""])[0]
            if len(first_line) > 44:
                first_line = first_line[:43] + "…"
            count = len(m["toolCalls"])
            calls = f" [{count} tool call{'s' if count != 1 else ''}]" if count else ""
            mark = f"  {GREEN}← active{RESET}" if m["id"] == active_leaf else ""
            branch = ("└ " if last else "├ ") if parent is not None else ""
            lines.append(f"{prefix}{branch}{m['role']}: {first_line}{calls}{mark}")
            walk(m["id"], prefix + (("  " if last else "│ ") if parent is not None else ""))

    walk(None, "")
    show("message tree", lines[0] if lines else "(empty)")
    for line in lines[1:]:
        print(f"{TurnPrinter.INDENT}{line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="keep the data here instead of a temp dir")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every message received")
    args = parser.parse_args()
    if args.data_dir:
        return anyio.run(run, args.data_dir.absolute(), args.verbose)
    with tempfile.TemporaryDirectory(prefix="sidecar-demo-") as tmp:
        return anyio.run(run, Path(tmp) / "data", args.verbose)


if __name__ == "__main__":
    raise SystemExit(main())
