"""Worker processes for Python toolset tools: real processes, no mocks."""

from __future__ import annotations

import logging
import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.sandbox.runner import Sandbox
from sidecar.tools.providers.python.workers import Limits, ToolFailure, ToolsetWorkers, WorkerHost
from tests.procs import wait_gone
from tests.timing import scaled

# The pool's mechanics compare the pids tools see with the pool's: unconfined here (a sandboxed
# worker sees its own pid namespace); tests/sandbox runs the sandboxed worker.
UNCONFINED = Sandbox("none")

pytestmark = pytest.mark.anyio

TOOLS = '''
import asyncio, ctypes, fcntl, os, stat, subprocess, sys, time
from pathlib import Path
from covalt_toolset import tool, get_context

@tool
def word_stats(text: str, top: int = 3) -> dict:
    """Count the words of a text.

    Args:
        text: The text to count.
        top: How many of the most common words to return.
    """
    words = text.split()
    return {"words": len(words), "top": sorted(set(words))[:top]}

@tool
def where() -> dict:
    ctx = get_context()
    Path("made.txt").write_text("made by a tool")
    return {"workspace": str(ctx.workspace), "cwd": os.getcwd(), "chat": ctx.chat_id,
            "toolset": ctx.toolset_id, "pid": os.getpid()}

@tool
async def slow_echo(value: str) -> dict:
    await asyncio.sleep(0.01)
    return {"echo": value, "workspace": str(get_context().workspace)}

def write_file(workspace, path, content):
    (workspace / path).write_text(content)
    return {"written": path, "pid": os.getpid()}

@tool
def fail(message: str) -> None:
    raise ValueError(message)

@tool
def pid() -> int:
    return os.getppid()  # the worker's: each call runs in a child forked from it

@tool
def hang(marker: str = "") -> None:
    if marker:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(60)

@tool
def hang_with_child(marker: str) -> None:
    child = subprocess.Popen(["sleep", "1000"])
    Path(marker).write_text(str(child.pid))
    time.sleep(60)

@tool
def exit_hard() -> None:
    print("about to leave", file=sys.stderr, flush=True)
    os._exit(3)

@tool
def segfault() -> None:
    ctypes.string_at(0)

@tool
def hog() -> int:
    return len(bytearray(1 << 30))

@tool
def big(n: int) -> str:
    return "x" * n

@tool
def noisy() -> str:
    print("printed by the tool")
    os.write(1, b"written to fd 1 by the tool\\n")
    subprocess.run(["echo", "echoed by a child"], check=True)
    return "still fine"

@tool
def environment() -> dict:
    return dict(os.environ)

@tool
def late_marker(started: str, done: str) -> None:
    Path(started).write_text(str(os.getpid()))
    time.sleep(0.8)
    Path(done).write_text("done")

@tool
def meet(me: str, other: str) -> dict:
    Path(me).write_text(str(os.getpid()))
    deadline = time.monotonic() + 10
    while not Path(other).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"pid": os.getppid(), "met": Path(other).exists()}

@tool
def version() -> int:
    return 1

@tool
def stray() -> str:
    lines = b'{"jsonrpc":"2.0","id":0,"result":1}\\nnot JSON at all\\n{"jsonrpc":"2.0","id":null,"result":2}\\n'
    os.write(1, lines)
    # A library that kept the process's first stdout would write onto the worker's pipe.
    for fd in range(3, 256):
        try:
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_WRONLY:
                continue
            if not stat.S_ISFIFO(os.fstat(fd).st_mode) or os.path.samestat(os.fstat(fd), os.fstat(2)):
                continue
        except OSError:
            continue
        os.write(fd, lines)
    return "mine"

@tool
def nested(depth: int) -> list:
    value = []
    for _ in range(depth):
        value = [value]
    return value
'''

LEGACY_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}


def make_toolset(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "tools" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def toolset(tmp_path: Path) -> Path:
    return make_toolset(tmp_path / "toolset", {"demo.py": TOOLS})


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
async def pool(toolset: Path) -> Any:
    p = ToolsetWorkers("demo", toolset, Limits(memory_bytes=256 << 20, output_bytes=64 << 10), sandbox=UNCONFINED)
    yield p
    await p.aclose()


def call(pool: ToolsetWorkers, workspace: Path, name: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
    context = {"workspace": str(workspace), "chatId": "chat-1", "toolCallId": "call-1"}
    return pool.call(name, f"tools.demo:{name}", args or {}, context=context, **kw)


async def failure(awaitable: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await awaitable
    return info.value


async def wait_for_file(path: Path) -> None:
    with anyio.fail_after(scaled(10)):
        while True:
            if await anyio.Path(path).exists():
                break
            await anyio.sleep(0.01)


# -- results ---------------------------------------------------------------------------------------


async def test_sync_tool_runs_in_the_workspace(pool: ToolsetWorkers, workspace: Path, toolset: Path) -> None:
    result = await call(pool, workspace, "where")
    assert result["workspace"] == str(workspace)
    assert result["cwd"] == str(workspace)
    assert result["chat"] == "chat-1"
    assert result["toolset"] == "demo"
    assert result["pid"] != os.getpid()
    assert (workspace / "made.txt").read_text() == "made by a tool"
    assert not [p async for p in anyio.Path(toolset).rglob("__pycache__")]  # the toolset folder is managed content


async def test_async_tool(pool: ToolsetWorkers, workspace: Path) -> None:
    assert await call(pool, workspace, "slow_echo", {"value": "hi"}) == {
        "echo": "hi",
        "workspace": str(workspace),
    }


async def test_legacy_function_gets_the_workspace(pool: ToolsetWorkers, workspace: Path) -> None:
    args = {"path": "notes.md", "content": "# hi"}
    result = await call(pool, workspace, "write_file", args, input_schema=LEGACY_SCHEMA)
    assert result["written"] == "notes.md"
    assert (workspace / "notes.md").read_text() == "# hi"
    bad = await failure(call(pool, workspace, "write_file", {"path": "x"}, input_schema=LEGACY_SCHEMA))
    assert (bad.kind, bad.path) == ("arguments", "args.content")


async def test_warm_worker_is_reused(pool: ToolsetWorkers, workspace: Path) -> None:
    first = await call(pool, workspace, "pid")
    assert await call(pool, workspace, "pid") == first
    assert pool.stats()["pids"] == [first]


# -- describe --------------------------------------------------------------------------------------


async def test_describe_infers_the_spec(pool: ToolsetWorkers) -> None:
    found = await pool.describe({"stats": "tools.demo:word_stats", "write": "tools.demo:write_file"})
    spec = found["stats"]["ok"]
    assert spec["name"] == "word_stats"
    assert spec["description"] == "Count the words of a text."
    assert spec["legacy"] is False
    assert spec["inputSchema"]["required"] == ["text"]
    assert spec["inputSchema"]["properties"]["top"] == {
        "type": "integer",
        "default": 3,
        "description": "How many of the most common words to return.",
    }
    assert found["write"]["ok"]["legacy"] is True
    assert found["write"]["ok"]["inputSchema"] is None


async def test_describe_reports_load_errors_by_file(tmp_path: Path) -> None:
    root = make_toolset(tmp_path / "broken", {
        "needs.py": "import pandas_not_installed_here\ndef f(workspace): pass\n",
        "syntax.py": "def f(:\n",
        "ok.py": "def f(workspace): return 1\n",
    })
    pool = ToolsetWorkers("broken", root, Limits(), sandbox=UNCONFINED)
    try:
        found = await pool.describe({
            "a": "tools.needs:f",
            "b": "tools.syntax:f",
            "c": "tools.missing:f",
            "d": "tools.ok:nope",
            "e": "tools.ok:f",
        })
    finally:
        await pool.aclose()
    assert found["a"]["error"] == (
        "tools/needs.py: ModuleNotFoundError: No module named 'pandas_not_installed_here'"
    )
    assert found["b"]["error"].startswith("tools/syntax.py: SyntaxError")
    assert found["c"]["error"] == "tools/missing.py: no such file in the toolset"
    assert found["d"]["error"] == "tools/ok.py: no function 'nope'"
    assert "ok" in found["e"]


async def test_call_of_a_missing_module_is_a_load_failure(pool: ToolsetWorkers, workspace: Path) -> None:
    context = {"workspace": str(workspace)}
    exc = await failure(pool.call("x", "tools.absent:x", {}, context=context))
    assert exc.kind == "load"
    assert "tools/absent.py" in exc.message


# -- failures --------------------------------------------------------------------------------------


async def test_argument_errors_carry_the_path(pool: ToolsetWorkers, workspace: Path) -> None:
    wrong = await failure(call(pool, workspace, "word_stats", {"text": "a b", "top": "three"}))
    assert (wrong.kind, wrong.path) == ("arguments", "args.top")
    assert "int" in wrong.message
    missing = await failure(call(pool, workspace, "word_stats", {}))
    assert (missing.kind, missing.path) == ("arguments", "args.text")
    assert "missing" in missing.message


async def test_raised_exception_keeps_the_worker(pool: ToolsetWorkers, workspace: Path) -> None:
    before = await call(pool, workspace, "pid")
    exc = await failure(call(pool, workspace, "fail", {"message": "no such column 'price'"}))
    assert exc.kind == "raised"
    assert exc.message == "ValueError: no such column 'price'"
    assert exc.traceback is not None and "demo.py" in exc.traceback
    assert "covalt_worker" not in exc.traceback and "worker_process" not in exc.traceback
    assert await call(pool, workspace, "pid") == before


async def test_timeout_stops_the_call_and_keeps_the_worker(pool: ToolsetWorkers, workspace: Path,
                                                          tmp_path: Path) -> None:
    before = await call(pool, workspace, "pid")
    marker = tmp_path / "hanging"
    exc = await failure(call(pool, workspace, "hang", {"marker": str(marker)}, timeout=1.5))
    assert exc.kind == "timeout"
    assert "hang did not finish within 1.5 s" in exc.message
    assert "constraints.timeout_seconds" in exc.message
    assert await wait_gone(int(marker.read_text()))
    assert await call(pool, workspace, "pid") == before


async def test_timeout_kills_the_tools_children(pool: ToolsetWorkers, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    # 2 s: the child must start and the marker be written first, on a loaded machine too.
    exc = await failure(call(pool, workspace, "hang_with_child", {"marker": str(marker)}, timeout=2))
    assert exc.kind == "timeout"
    assert await wait_gone(int(marker.read_text()))


@pytest.mark.parametrize(
    ("tool", "kind", "words"),
    [
        ("exit_hard", "crashed", ["exited with code 3", "about to leave"]),
        ("segfault", "crashed", ["SIGSEGV", "Segmentation fault"]),
        ("hog", "limit", ["MemoryError", "256 MiB", "sandbox.memory"]),
    ],
)
async def test_a_dying_call_fails_only_itself_and_keeps_the_worker(
    pool: ToolsetWorkers, workspace: Path, tool: str, kind: str, words: list[str]
) -> None:
    before = await call(pool, workspace, "pid")
    exc = await failure(call(pool, workspace, tool))
    assert exc.kind == kind
    for word in words:
        assert word in exc.message
    assert await call(pool, workspace, "word_stats", {"text": "still here"}) == {
        "words": 2,
        "top": ["here", "still"],
    }
    assert await call(pool, workspace, "pid") == before


async def test_lines_a_tool_writes_onto_the_pipe_are_never_taken_for_answers(
    pool: ToolsetWorkers, workspace: Path
) -> None:
    assert await call(pool, workspace, "stray") == "mine"
    assert await call(pool, workspace, "word_stats", {"text": "b a"}) == {"words": 2, "top": ["a", "b"]}
    assert await call(pool, workspace, "big", {"n": 3}) == "xxx"


async def test_a_deeply_nested_result_fails_only_its_call(pool: ToolsetWorkers, workspace: Path) -> None:
    before = await call(pool, workspace, "pid")
    exc = await failure(call(pool, workspace, "nested", {"depth": 990}))
    assert exc.kind == "output"
    assert "nested" in exc.message
    assert len(str(await call(pool, workspace, "nested", {"depth": 50}))) == 102
    assert len(str(await call(pool, workspace, "nested", {"depth": 200}))) == 402
    assert await call(pool, workspace, "pid") == before


async def test_result_over_the_output_limit(pool: ToolsetWorkers, workspace: Path) -> None:
    assert len(await call(pool, workspace, "big", {"n": 1000})) == 1000
    exc = await failure(call(pool, workspace, "big", {"n": 100_000}))
    assert exc.kind == "output"
    assert "64 KiB" in exc.message


async def test_output_of_the_tool_goes_to_stderr(
    pool: ToolsetWorkers, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sidecar.tools")
    assert await call(pool, workspace, "noisy") == "still fine"
    assert await call(pool, workspace, "noisy") == "still fine"
    with anyio.fail_after(scaled(3)):
        while True:
            if "demo: echoed by a child" in caplog.messages:
                break
            await anyio.sleep(0.01)
    assert "demo: printed by the tool" in caplog.messages
    assert "demo: written to fd 1 by the tool" in caplog.messages


async def test_environment_is_scrubbed(
    pool: ToolsetWorkers, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("SOME_TOKEN", "t0ken")
    env = await call(pool, workspace, "environment")
    assert "OPENAI_API_KEY" not in env and "SOME_TOKEN" not in env
    assert "sk-secret" not in env.values()
    assert env["COVALT_TOOLSET_ID"] == "demo"
    assert env["PATH"] == os.environ["PATH"]


# -- concurrency and lifecycle ---------------------------------------------------------------------


async def test_cancelling_the_caller_stops_the_tool(pool: ToolsetWorkers, workspace: Path, tmp_path: Path) -> None:
    started, done = tmp_path / "started", tmp_path / "done"
    args = {"started": str(started), "done": str(done)}
    pid = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, pool, workspace, "late_marker", args)
        await wait_for_file(started)
        [pid] = pool.stats()["pids"]
        tg.cancel_scope.cancel()
    assert await wait_gone(int(started.read_text()))
    await anyio.sleep(1.0)  # past the moment the tool would have written its marker
    assert not done.exists()
    assert await call(pool, workspace, "pid") == pid  # only the call's process was stopped


async def test_two_calls_run_in_parallel(pool: ToolsetWorkers, workspace: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    results: list[Any] = []

    async def meet(me: Path, other: Path) -> None:
        results.append(await call(pool, workspace, "meet", {"me": str(me), "other": str(other)}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(meet, a, b)
        tg.start_soon(meet, b, a)
    assert [r["met"] for r in results] == [True, True]
    assert results[0]["pid"] != results[1]["pid"]


async def test_restart_loads_changed_code(pool: ToolsetWorkers, workspace: Path, toolset: Path) -> None:
    assert await call(pool, workspace, "version") == 1
    module = toolset / "tools" / "demo.py"
    module.write_text(module.read_text().replace("return 1", "return 2"))
    assert await call(pool, workspace, "version") == 1  # the warm worker keeps what it imported
    await pool.restart()
    assert await call(pool, workspace, "version") == 2


async def test_idle_worker_is_replaced(toolset: Path, workspace: Path) -> None:
    pool = ToolsetWorkers("demo", toolset, Limits(idle_seconds=0.4), sandbox=UNCONFINED)
    try:
        first = await call(pool, workspace, "pid")
        assert await wait_gone(first)  # the worker left by itself
        assert await call(pool, workspace, "pid") != first
    finally:
        await pool.aclose()


async def test_host_pools_and_aclose(toolset: Path, tmp_path: Path, workspace: Path) -> None:
    other = make_toolset(tmp_path / "other", {"demo.py": TOOLS})
    host = WorkerHost(Limits(), UNCONFINED)
    first = host.pool("demo", toolset)
    assert host.pool("demo", toolset) is first
    pids = [await call(first, workspace, "pid"), await call(host.pool("other", other), workspace, "pid")]
    assert host.stats()["workers"] == 2

    moved = host.pool("demo", other)  # an upgrade: same toolset, new folder
    assert moved is first
    assert await wait_gone(pids[0])
    pids.append(await call(moved, workspace, "pid"))

    await host.discard("other")
    assert await wait_gone(pids[1])
    await host.aclose()
    assert host.stats()["workers"] == 0
    for pid in pids:
        assert await wait_gone(pid)


async def test_aclose_fails_a_running_call(toolset: Path, workspace: Path, tmp_path: Path) -> None:
    pool = ToolsetWorkers("demo", toolset, Limits(), sandbox=UNCONFINED)
    marker = tmp_path / "hanging"
    outcome: list[ToolFailure] = []

    async def run() -> None:
        outcome.append(await failure(call(pool, workspace, "hang", {"marker": str(marker)})))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wait_for_file(marker)
        await pool.aclose()
    assert outcome[0].kind == "cancelled"
    assert await wait_gone(int(marker.read_text()))
    assert (await failure(call(pool, workspace, "pid"))).kind == "cancelled"


async def test_sigterm_to_a_worker_is_a_crash(pool: ToolsetWorkers, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "hanging"
    outcome: list[ToolFailure] = []

    async def run() -> None:
        outcome.append(await failure(call(pool, workspace, "hang", {"marker": str(marker)})))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wait_for_file(marker)
        os.kill(int(marker.read_text()), signal.SIGTERM)
    assert outcome[0].kind == "crashed"
    assert "SIGTERM" in outcome[0].message
    assert isinstance(await call(pool, workspace, "pid"), int)
