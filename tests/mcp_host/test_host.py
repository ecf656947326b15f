"""McpHost against real MCP servers (tests/fixtures/mcp), over stdio, streamable HTTP and SSE."""

from __future__ import annotations

import logging
import os
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.mcp_host import (
    CallOrigin,
    ElicitAnswer,
    Elicitation,
    McpError,
    McpHost,
    ServerConfig,
    ServerState,
    commands,
)
from tests.npm import npm_bin
from tests.procs import alive, served
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"
PY = sys.executable


def stdio(key: str, script: str = "basic.py", **kw: Any) -> ServerConfig:
    kw.setdefault("args", (str(FIXTURES / script),))
    kw.setdefault("connect_timeout", scaled(15.0))
    return ServerConfig(server_id=key, toolset_id="ts", type="stdio", command=PY, **kw)


@dataclass
class Recorder:
    states: list[ServerState] = field(default_factory=list)
    tools_changed: list[str] = field(default_factory=list)
    elicited: list[Elicitation] = field(default_factory=list)
    answer: ElicitAnswer = field(default_factory=lambda: ElicitAnswer("accept", {"name": "Ada", "age": 36}))

    async def on_status(self, state: ServerState) -> None:
        self.states.append(state)

    async def on_tools_changed(self, key: str) -> None:
        self.tools_changed.append(key)

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        self.elicited.append(request)
        return self.answer


@asynccontextmanager
async def running(*configs: ServerConfig, **kw: Any) -> AsyncIterator[tuple[McpHost, Recorder]]:
    rec = Recorder()
    host = McpHost(on_status=rec.on_status, on_tools_changed=rec.on_tools_changed, elicit=rec.elicit, **kw)
    async with anyio.create_task_group() as tg:
        host.bind(tg)
        await host.sync(configs)
        try:
            yield host, rec
        finally:
            await host.aclose()
            tg.cancel_scope.cancel()


async def wait_status(host: McpHost, key: str, *statuses: str, timeout: float = 15.0) -> ServerState:
    with anyio.move_on_after(scaled(timeout)):
        while (state := host.state(key)).status not in statuses:
            await anyio.sleep(0.02)
        return state
    pytest.fail(f"{key} never became {statuses}: {host.state(key)}")


def text(result: dict) -> str:
    return "".join(c.get("text", "") for c in result["content"])


def login_shell(path: str) -> str:
    """A stand-in for the user's shell whose login profile sets PATH to `path` (called as `-lc CMD`)."""
    return f'#!/bin/sh\nPATH="{path}" exec /bin/sh -c "$2"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def http_fixture(flag: str) -> AsyncIterator[int]:
    """basic.py served over HTTP (`--http` or `--sse`); yields its port."""
    async with served([PY, str(FIXTURES / "basic.py"), flag], timeout=15) as words:
        yield int(words[1])


# -- stdio: the whole surface ----------------------------------------------------------------------


async def test_stdio_connects_lists_and_keeps_every_kind_of_content() -> None:
    async with running(stdio("basic")) as (host, rec):
        state = await wait_status(host, "ts~basic", "connected", "error")
        assert state.status == "connected", state.error
        assert state.server_name == "basic-fixture"
        assert [s.status for s in rec.states] == ["connecting", "connected"]
        tools = {t.name: t for t in host.tools("ts~basic")}
        assert {"echo", "add", "slow", "big", "image", "resource", "structured", "ask", "grow"} <= set(tools)
        assert state.tool_count == len(tools)
        assert tools["echo"].description == "Echo the text back."
        assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
        assert tools["structured"].output_schema is not None

        assert text(await host.call_tool("ts~basic", "echo", {"text": "hi"})) == "hi"
        assert text(await host.call_tool("ts~basic", "add", {"a": 2, "b": 3})) == "5.0"

        image = await host.call_tool("ts~basic", "image", {})
        assert image["content"][0]["type"] == "image" and image["content"][0]["mimeType"] == "image/png"
        assert image["content"][0]["data"].startswith("iVBORw0KGgo")
        assert image["content"][1] == {"type": "text", "text": "a pixel"}
        assert image["isError"] is False and "structuredContent" not in image

        res = await host.call_tool("ts~basic", "resource", {})
        assert res["content"][0] == {"type": "resource", "resource": {
            "uri": "fixture://notes/1", "mimeType": "text/markdown", "text": "# Notes"}}
        assert res["content"][1]["type"] == "resource_link" and res["content"][1]["uri"] == "fixture://notes/2"

        structured = await host.call_tool("ts~basic", "structured", {"city": "Oslo"})
        assert structured["structuredContent"] == {"city": "Oslo", "temperature": 21.5}

        failed = await host.call_tool("ts~basic", "fail", {})
        assert failed["isError"] is True

        unknown = await host.call_tool("ts~basic", "no_such_tool", {})
        assert unknown["isError"] is True and "no_such_tool" in text(unknown)

        for code in (-32000, -32602, 42):  # -32000 is the SDK's "connection closed" code too
            with pytest.raises(McpError) as err:
                await host.call_tool("ts~basic", "rpc_error", {"code": code})
            assert (err.value.kind, err.value.server_code, err.value.server_data) == ("server", code, {"why": "asked to"})
            assert err.value.__rpc_error__()[0] == -32020 and err.value.server == "ts~basic"
            assert "custom failure" in err.value.message
        assert host.state("ts~basic").status == "connected"

        resources = await host.list_resources("ts~basic")
        assert [r["uri"] for r in resources] == ["fixture://greeting"]
        read = await host.read_resource("ts~basic", "fixture://greeting")
        assert read["contents"][0]["text"] == "hello from the fixture"
        with pytest.raises(McpError) as err:  # a JSON-RPC error from the server
            await host.read_resource("ts~basic", "fixture://nope")
        assert err.value.kind == "server" and err.value.server_code is not None
        assert "fixture://nope" in err.value.message
        prompts = await host.list_prompts("ts~basic")
        assert prompts[0]["name"] == "review"
        prompt = await host.get_prompt("ts~basic", "review", {"code": "x = 1"})
        assert "x = 1" in prompt["messages"][0]["content"]["text"]


async def test_tools_are_listed_across_pages() -> None:
    async with running(stdio("paged", "paged.py")) as (host, _):
        state = await wait_status(host, "ts~paged", "connected", "error")
        assert state.status == "connected", state.error
        assert [t.name for t in host.tools("ts~paged")] == [f"tool_{i:02d}" for i in range(25)]
        assert state.tool_count == 25
        assert text(await host.call_tool("ts~paged", "tool_24", {})) == "called tool_24"


async def test_calls_to_a_server_that_is_not_connected_fail_at_once() -> None:
    async with running(stdio("off", enabled=False)) as (host, rec):
        assert host.state("ts~off").status == "disabled"
        assert rec.states[-1].status == "disabled"
        assert host.tools("ts~off") == []
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~off", "echo", {"text": "x"})
        assert err.value.kind == "not_connected" and "disabled" in err.value.message
        assert err.value.__rpc_error__() == (-32011, err.value.message,
                                             {"source": "mcp", "server": "ts~off", "message": err.value.message,
                                              "reason": "not connected"})
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~nope", "echo", {"text": "x"})
        assert err.value.kind == "not_connected"
        with pytest.raises(KeyError):
            host.state("ts~nope")


# -- HTTP transports ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "flag", "path"), [("streamable-http", "--http", "/mcp"), ("sse", "--sse", "/sse")])
async def test_http_transports_call_tools_and_carry_10_mb(kind: str, flag: str, path: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COVALT_TEST_PORT_PATH", path)
    async with http_fixture(flag) as port:
        config = ServerConfig(server_id="web", toolset_id="ts", type=kind,  # type: ignore[arg-type]
                              url=f"http://127.0.0.1:{port}${{COVALT_TEST_PORT_PATH}}",
                              headers={"X-Test": "${COVALT_TEST_PORT_PATH}"}, connect_timeout=30)
        async with running(config) as (host, _):
            state = await wait_status(host, "ts~web", "connected", "error")
            assert state.status == "connected", state.error
            assert "echo" in {t.name for t in host.tools("ts~web")}
            assert text(await host.call_tool("ts~web", "echo", {"text": "over http"})) == "over http"
            progress: list[float] = []

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(p)

            assert text(await host.call_tool("ts~web", "slow", {"seconds": 0.3}, on_progress=on_progress)) == "done"
            assert progress and progress[-1] == 3
            big = await host.call_tool("ts~web", "big", {"mb": 10})
            assert len(big["content"][0]["text"]) == 10 * 1024 * 1024
            assert text(await host.call_tool("ts~web", "ask", {})) == "hello Ada (36)"


async def test_a_url_with_nothing_listening_is_an_error_state() -> None:
    port = free_port()
    configs = [
        ServerConfig(server_id="h", toolset_id="ts", type="streamable-http",
                     url=f"http://127.0.0.1:{port}/mcp?token=SECRET", connect_timeout=5),
        ServerConfig(server_id="s", toolset_id="ts", type="sse",
                     url=f"http://127.0.0.1:{port}/sse?token=SECRET", connect_timeout=5),
    ]
    async with running(*configs) as (host, _):
        for key in ("ts~h", "ts~s"):
            state = await wait_status(host, key, "error", timeout=8)
            assert f"cannot connect to http://127.0.0.1:{port}/" in state.error
            assert "SECRET" not in state.error


# -- configuration -----------------------------------------------------------------------------------


async def test_vars_are_resolved_and_the_child_gets_a_scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COVALT_TEST_PREFIX", "resolved:")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sidecar-secret")
    config = stdio("env", env={"FIXTURE_ECHO_PREFIX": "${COVALT_TEST_PREFIX}", "GIVEN": "x${COVALT_TEST_PREFIX}y"})
    async with running(config) as (host, _):
        state = await wait_status(host, "ts~env", "connected", "error")
        assert state.status == "connected", state.error
        assert text(await host.call_tool("ts~env", "echo", {"text": "hi"})) == "resolved:hi"
        assert text(await host.call_tool("ts~env", "env", {"name": "GIVEN"})) == "xresolved:y"
        assert text(await host.call_tool("ts~env", "env", {"name": "OPENAI_API_KEY"})) == "<unset>"
        assert text(await host.call_tool("ts~env", "env", {"name": "PATH"})) != "<unset>"


async def test_a_missing_var_is_a_clear_error_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COVALT_TEST_MISSING", raising=False)
    configs = [stdio("needs", env={"TOKEN": "${COVALT_TEST_MISSING}"}),
               ServerConfig(server_id="url", toolset_id="ts", type="streamable-http",
                            url="http://127.0.0.1:1/${COVALT_TEST_MISSING}")]
    async with running(*configs) as (host, rec):
        for key in ("ts~needs", "ts~url"):
            state = await wait_status(host, key, "error", timeout=5)
            assert state.error == ("COVALT_TEST_MISSING is not set: store it as a secret (secrets/set, in the "
                                   "app's secret settings) or set it in the environment the app starts from")


async def test_command_not_found_names_the_command_and_the_path(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    fake_shell = tmp_path / "fake-shell"
    fake_shell.write_text(login_shell(str(tmp_path / "nothing")))
    fake_shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(fake_shell))
    monkeypatch.setattr(commands, "_login_path", None)
    monkeypatch.setattr(commands, "_login_path_known", False)
    config = ServerConfig(server_id="missing", toolset_id="ts", type="stdio",
                          command="covalt-no-such-server", env={"PATH": "/covalt/bin:/usr/bin"})
    async with running(config) as (host, _):
        state = await wait_status(host, "ts~missing", "error", timeout=8)
        assert "command not found: 'covalt-no-such-server'" in state.error
        assert "/covalt/bin:/usr/bin" in state.error
        assert str(tmp_path / "nothing") in state.error  # the login shell's PATH was searched too


async def test_a_command_only_on_the_login_shell_path_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    launcher = bindir / "covalt-fixture-server"
    launcher.write_text(f"#!{PY}\nimport runpy, sys\nsys.argv[0] = {str(FIXTURES / 'basic.py')!r}\n"
                        f"runpy.run_path(sys.argv[0], run_name='__main__')\n")
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    fake_shell = tmp_path / "fake-shell"
    fake_shell.write_text(login_shell(f"{bindir}:/usr/bin:/bin"))
    fake_shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(fake_shell))
    monkeypatch.setattr(commands, "_login_path", None)
    monkeypatch.setattr(commands, "_login_path_known", False)
    config = ServerConfig(server_id="login", toolset_id="ts", type="stdio",
                          command="covalt-fixture-server", env={"PATH": "/usr/bin:/bin"}, connect_timeout=scaled(15))
    with caplog.at_level(logging.INFO, logger="sidecar.mcp_host"):
        async with running(config) as (host, _):
            state = await wait_status(host, "ts~login", "connected", "error")
            assert state.status == "connected", state.error
            child_path = text(await host.call_tool("ts~login", "env", {"name": "PATH"}))
            assert str(bindir) in child_path.split(os.pathsep)
    assert any("login shell" in r.getMessage() for r in caplog.records)


# -- faults ------------------------------------------------------------------------------------------


async def test_broken_servers_are_error_states_and_the_others_keep_working() -> None:
    configs = [stdio("good"), stdio("exits", "exits.py"), stdio("hangs", "hangs.py", connect_timeout=1.0),
               stdio("garbage", "garbage.py")]
    async with running(*configs) as (host, _):
        exits = await wait_status(host, "ts~exits", "error")
        assert "exited with code 3 before completing the MCP handshake" in exits.error
        assert "fatal: the database file is missing" in exits.error  # the stderr tail

        hangs = await wait_status(host, "ts~hangs", "error")
        assert "no answer to the MCP handshake within 1 s" in hangs.error
        assert "thinking forever" in hangs.error

        garbage = await wait_status(host, "ts~garbage", "error")
        assert "Welcome to my server! This is not JSON." in garbage.error
        assert "JSON-RPC" in garbage.error

        good = await wait_status(host, "ts~good", "connected")
        assert good.error is None
        assert text(await host.call_tool("ts~good", "echo", {"text": "fine"})) == "fine"


async def test_a_permanently_broken_server_backs_off_instead_of_spinning(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    script = tmp_path / "count_and_exit.py"
    script.write_text(f"open({str(counter)!r}, 'a').write('x')\nraise SystemExit(1)\n")
    async with running(stdio("flaky", args=(str(script),))) as (host, rec):
        await wait_status(host, "ts~flaky", "error")
        await anyio.sleep(2.0)
        starts = len(counter.read_text())
        # 0.5 s, 1 s, 2 s, ...: at most 3 starts in ~2 s (a spinning loop would make dozens).
        assert 1 <= starts <= 3, starts
        assert all(s.status in ("connecting", "error") for s in rec.states)
        assert [s.status for s in rec.states].count("connecting") == 1  # retries stay "error"


async def test_a_crash_during_a_call_fails_it_and_the_server_comes_back() -> None:
    async with running(stdio("crashy")) as (host, rec):
        await wait_status(host, "ts~crashy", "connected")
        first_pid = int(text(await host.call_tool("ts~crashy", "pid", {})))
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~crashy", "crash", {})
        assert err.value.kind == "disconnected"
        # A server that worked is restarted at once; the state says why it dropped meanwhile.
        errors = [s for s in rec.states if s.error]
        with anyio.fail_after(scaled(10)):
            while not errors:
                await anyio.sleep(0.02)
                errors = [s for s in rec.states if s.error]
        assert "disconnected: the server exited with code 1" in errors[0].error
        assert "crashing on purpose" in errors[0].error
        await wait_status(host, "ts~crashy", "connected")
        assert int(text(await host.call_tool("ts~crashy", "pid", {}))) != first_pid
        assert not alive(first_pid)


# -- calls ---------------------------------------------------------------------------------------------


async def test_timeout_cancels_the_call_at_the_server_which_keeps_serving(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    async with running(stdio("slow")) as (host, _):
        await wait_status(host, "ts~slow", "connected")
        started = time.monotonic()
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~slow", "slow", {"seconds": 10, "marker": str(marker)}, timeout=0.5)
        assert err.value.kind == "timeout"
        code, _, data = err.value.__rpc_error__()
        assert code == -32022 and data["server"] == "ts~slow" and data["source"] == "mcp"
        assert time.monotonic() - started < 2
        with anyio.fail_after(scaled(5)):
            while not marker.exists():
                await anyio.sleep(0.02)
        assert marker.read_text() == "cancelled"
        assert text(await host.call_tool("ts~slow", "echo", {"text": "alive"})) == "alive"


async def test_cancelling_the_caller_returns_promptly_and_cancels_at_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    async with running(stdio("cancel")) as (host, _):
        await wait_status(host, "ts~cancel", "connected")
        started = time.monotonic()
        with anyio.move_on_after(0.3):
            await host.call_tool("ts~cancel", "slow", {"seconds": 10, "marker": str(marker)})
        assert time.monotonic() - started < 1.0
        with anyio.fail_after(scaled(5)):
            while not marker.exists():
                await anyio.sleep(0.02)
        assert text(await host.call_tool("ts~cancel", "echo", {"text": "alive"})) == "alive"


async def test_progress_reaches_the_callback() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running(stdio("progress")) as (host, _):
        await wait_status(host, "ts~progress", "connected")
        result = await host.call_tool("ts~progress", "slow", {"seconds": 0.5}, on_progress=on_progress)
        assert text(result) == "done"
        await anyio.sleep(0.05)
        assert len(seen) == 5
        assert seen[-1] == (5.0, 5.0, "step 5")


async def test_a_10_mb_result_arrives_whole_and_a_too_large_one_fails_cleanly() -> None:
    async with running(stdio("big")) as (host, _):
        await wait_status(host, "ts~big", "connected")
        result = await host.call_tool("ts~big", "big", {"mb": 10})
        assert result["content"][0]["text"] == "x" * (10 * 1024 * 1024)
    async with running(stdio("cap"), max_result_bytes=1 << 20) as (host, _):
        await wait_status(host, "ts~cap", "connected")
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~cap", "big", {"mb": 3})
        assert err.value.kind == "too_large"
        assert text(await host.call_tool("ts~cap", "echo", {"text": "after"})) == "after"
        assert host.state("ts~cap").status == "connected"


async def test_list_changed_refreshes_the_tools() -> None:
    async with running(stdio("grow")) as (host, rec):
        await wait_status(host, "ts~grow", "connected")
        before = host.state("ts~grow").tool_count
        assert "extra" not in {t.name for t in host.tools("ts~grow")}
        published = len(rec.states)
        await host.call_tool("ts~grow", "grow", {})
        with anyio.fail_after(scaled(5)):
            while not rec.tools_changed:
                await anyio.sleep(0.02)
        assert rec.tools_changed == ["ts~grow"]
        assert "extra" in {t.name for t in host.tools("ts~grow")}
        assert host.state("ts~grow").tool_count == before + 1
        assert rec.states[-1].tool_count == before + 1
        assert len(rec.states) == published + 1  # one status for the change
        assert text(await host.call_tool("ts~grow", "extra", {})) == "extra!"


async def test_elicitation_round_trips() -> None:
    async with running(stdio("ask")) as (host, rec):
        await wait_status(host, "ts~ask", "connected")
        assert text(await host.call_tool("ts~ask", "ask", {}, timeout=30)) == "hello Ada (36)"
        asked = rec.elicited[0]
        assert asked.key == "ts~ask"
        assert asked.message == "What is your name?"
        assert asked.requested_schema is not None
        assert asked.requested_schema["properties"]["name"]["type"] == "string"
        rec.answer = ElicitAnswer("decline")
        assert text(await host.call_tool("ts~ask", "ask", {})) == "no answer: decline"


async def test_url_mode_elicitation_reaches_the_user_with_its_url_and_id() -> None:
    async with running(stdio("url")) as (host, rec):
        await wait_status(host, "ts~url", "connected")
        rec.answer = ElicitAnswer("accept")
        origin = CallOrigin(chat_id="chat-1", tool_call_id="call-1")
        assert text(await host.call_tool("ts~url", "ask_url", {}, origin=origin)) == "url answer: accept"
        asked = rec.elicited[0]
        assert (asked.mode, asked.url, asked.elicitation_id) == ("url", "https://example.com/login?state=abc",
                                                                 "login-1")
        assert asked.message == "Sign in to the fixture" and asked.requested_schema is None
        assert asked.origin == origin and asked.chat_id == "chat-1"


@pytest.mark.parametrize("url", ["javascript:alert(document.cookie)", "file:///etc/passwd", "https:///no-host",
                                 "data:text/html,<script>1</script>"])
async def test_a_url_mode_elicitation_that_is_not_a_web_page_is_declined_without_asking(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    async with running(stdio("badurl")) as (host, rec):
        await wait_status(host, "ts~badurl", "connected")
        rec.answer = ElicitAnswer("accept")
        with caplog.at_level(logging.WARNING, logger="sidecar.mcp_host"):
            result = await host.call_tool("ts~badurl", "ask_url_to", {"url": url})
        assert text(result) == "url answer: decline"
        assert rec.elicited == []
        assert any("not an http(s) URL" in r.getMessage() for r in caplog.records)
        assert text(await host.call_tool("ts~badurl", "ask_url_to", {"url": "http://example.com/ok"})) \
            == "url answer: accept"
        assert [r.url for r in rec.elicited] == ["http://example.com/ok"]


async def test_an_elicitation_names_the_call_it_came_from() -> None:
    async with running(stdio("who")) as (host, rec):
        await wait_status(host, "ts~who", "connected")
        origin = CallOrigin(chat_id="chat-2", tool_call_id="call-2")
        await host.call_tool("ts~who", "ask", {}, origin=origin)
        assert rec.elicited[0].mode == "form" and rec.elicited[0].origin == origin


async def test_with_several_calls_in_flight_only_their_shared_chat_is_named() -> None:
    async with running(stdio("many")) as (host, rec):
        await wait_status(host, "ts~many", "connected")
        both_asked = anyio.Event()

        async def answer_when_both_asked(request: Elicitation) -> ElicitAnswer:
            rec.elicited.append(request)
            if len(rec.elicited) == 2:
                both_asked.set()
            await both_asked.wait()
            return ElicitAnswer("decline")

        host._connector.elicit = answer_when_both_asked  # noqa: SLF001
        async def ask(call_id: str) -> None:
            await host.call_tool("ts~many", "ask", {}, origin=CallOrigin("chat-a", call_id))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "t1")
            tg.start_soon(ask, "t2")
        assert [(r.origin, r.chat_id) for r in rec.elicited] == [(None, "chat-a"), (None, "chat-a")]


async def test_an_answer_that_does_not_fit_the_form_fails_the_call() -> None:
    async with running(stdio("misfit")) as (host, rec):
        await wait_status(host, "ts~misfit", "connected")
        rec.answer = ElicitAnswer("accept", {"name": 5, "age": "old"})
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~misfit", "ask", {}, origin=CallOrigin("c", "t"))
        assert err.value.kind == "elicitation" and "content.name" in err.value.message
        rec.answer = ElicitAnswer("accept", {"age": 3})  # "name" is required
        with pytest.raises(McpError) as err:
            await host.call_tool("ts~misfit", "ask", {})
        assert err.value.kind == "elicitation" and "name" in err.value.message
        rec.answer = ElicitAnswer("accept", {"name": "Fit", "age": 2})  # the server still works
        assert text(await host.call_tool("ts~misfit", "ask", {})) == "hello Fit (2)"


async def test_a_slow_user_does_not_count_against_the_call_timeout() -> None:
    async with running(stdio("patient")) as (host, rec):
        await wait_status(host, "ts~patient", "connected")

        async def slow_user(request: Elicitation) -> ElicitAnswer:
            await anyio.sleep(1.0)
            return ElicitAnswer("accept", {"name": "Slow", "age": 1})

        host._connector.elicit = slow_user  # noqa: SLF001
        assert text(await host.call_tool("ts~patient", "ask", {}, timeout=0.6)) == "hello Slow (1)"


# -- lifecycle -----------------------------------------------------------------------------------------


async def test_sync_starts_stops_and_restarts_what_changed() -> None:
    a, b = stdio("a"), stdio("b")
    async with running(a, b) as (host, _):
        await wait_status(host, "ts~a", "connected")
        await wait_status(host, "ts~b", "connected")
        pid_a = int(text(await host.call_tool("ts~a", "pid", {})))
        pid_b = int(text(await host.call_tool("ts~b", "pid", {})))

        b2 = stdio("b", env={"FIXTURE_ECHO_PREFIX": "v2:"})
        await host.sync([a, b2])  # a unchanged, b changed
        assert host.state("ts~b").status == "connecting"
        await wait_status(host, "ts~b", "connected")
        assert text(await host.call_tool("ts~b", "echo", {"text": "x"})) == "v2:x"
        assert int(text(await host.call_tool("ts~a", "pid", {}))) == pid_a
        assert not alive(pid_b)

        pid_b2 = int(text(await host.call_tool("ts~b", "pid", {})))
        await host.sync([a, stdio("b", enabled=False, env={"FIXTURE_ECHO_PREFIX": "v2:"})])
        assert host.state("ts~b").status == "disabled"
        await host.sync([a])
        with pytest.raises(KeyError):
            host.state("ts~b")
        with anyio.fail_after(scaled(5)):
            while alive(pid_b2):
                await anyio.sleep(0.05)

        await host.reconnect("ts~a")
        assert host.state("ts~a").status == "connecting"
        await wait_status(host, "ts~a", "connected")
        assert int(text(await host.call_tool("ts~a", "pid", {}))) != pid_a


async def test_aclose_leaves_no_process_behind() -> None:
    async with running(stdio("one"), stdio("two"), stdio("stubborn", "hangs.py", connect_timeout=30)) as (host, _):
        await wait_status(host, "ts~one", "connected")
        await wait_status(host, "ts~two", "connected")
        pids = [int(text(await host.call_tool(k, "pid", {}))) for k in ("ts~one", "ts~two")]
        grandchild = int(text(await host.call_tool("ts~one", "spawn_child", {})))
        assert alive(grandchild)
        conn = host._servers["ts~stubborn"].conn  # noqa: SLF001  (hangs.py can't tell us its pid)
        assert conn is not None and conn.transport is not None and conn.transport.pid
        pids.append(conn.transport.pid)
        started = time.monotonic()
        await host.aclose()
        assert time.monotonic() - started < 5
        assert not [pid for pid in [*pids, grandchild] if alive(pid)]
        await host.sync([stdio("late")])  # a sync racing shutdown starts nothing and raises nothing
        assert host.states() == []


async def test_a_killed_sidecar_leaves_no_server_behind() -> None:
    proc = await anyio.open_process([PY, str(FIXTURES / "host_then_die.py")], stderr=None)
    try:
        assert proc.stdout is not None
        line = b""
        with anyio.fail_after(scaled(20)):
            while b"\n" not in line:
                line += await proc.stdout.receive()
        server_pid = int(line.split()[0])
        assert alive(server_pid)
    finally:
        proc.kill()  # SIGKILL: no cleanup code of ours runs
        await proc.wait()
        await proc.aclose()
    with anyio.fail_after(scaled(5)):  # the server sees EOF on its stdin and exits
        while alive(server_pid):
            await anyio.sleep(0.05)


async def test_npm_server_everything() -> None:
    command = npm_bin("mcp-server-everything")
    config = ServerConfig(server_id="everything", toolset_id="ts", type="stdio",
                          command=command, args=("stdio",), connect_timeout=30)
    async with running(config) as (host, rec):
        state = await wait_status(host, "ts~everything", "connected", "error", timeout=30)
        assert state.status == "connected", state.error
        assert "echo" in {t.name for t in host.tools("ts~everything")}
        assert text(await host.call_tool("ts~everything", "echo", {"message": "hi"})).endswith("hi")
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)

        await host.call_tool("ts~everything", "trigger-long-running-operation", {"duration": 0.3, "steps": 3},
                             on_progress=on_progress)
        assert progress[-1] == 3
        image = await host.call_tool("ts~everything", "get-tiny-image", {})
        assert any(c["type"] == "image" for c in image["content"])
        rec.answer = {"action": "decline"}
        await host.call_tool("ts~everything", "trigger-elicitation-request", {})
        assert rec.elicited and rec.elicited[-1].key == "ts~everything"
        assert await host.list_prompts("ts~everything")
