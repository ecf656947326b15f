"""The app's one stop path, in-process over a memory transport."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from sidecar.app import Sidecar
from sidecar.rpc import MethodTable, memory_pair
from sidecar.settings import Settings, parse

pytestmark = pytest.mark.anyio


async def test_closers_run_in_reverse_and_a_failing_one_does_not_stop_the_rest(tmp_path: Path):
    app = Sidecar(Settings(data_dir=tmp_path, shutdown_timeout=2))
    order: list[str] = []

    def closer(name: str, fail: bool = False):
        async def close() -> None:
            order.append(name)
            if fail:
                raise RuntimeError("closing failed")
        return close

    app.on_close("first", closer("first"))
    app.on_close("broken", closer("broken", fail=True))
    app.on_close("last", closer("last"))
    await app.shutdown()
    await app.shutdown()  # idempotent
    assert order == ["last", "broken", "first"]


async def test_a_request_that_ignores_cancellation_cannot_hold_shutdown_past_half_the_deadline(tmp_path: Path):
    table = MethodTable()

    async def stubborn(params, ctx):
        await ctx.wait_cancel_requested()  # signal mode: asked to stop...
        await anyio.sleep(60)  # ...but keeps going: shutdown must interrupt it
        return {}

    table.add("initialize", lambda p, c: anyio.lowlevel.checkpoint(), inline=True)
    table.add("stubborn", stubborn, cancel="signal")
    server_t, client_t = memory_pair()
    app = Sidecar(Settings(data_dir=tmp_path, shutdown_timeout=1.0))
    async with anyio.create_task_group() as tg:
        result: list[int] = []

        async def run() -> None:
            result.append(await app.run(server_t, table))

        tg.start_soon(run)
        await client_t.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'
                            b'{"jsonrpc":"2.0","id":2,"method":"stubborn"}\n')
        assert json.loads((await client_t.receive())[0])["id"] == 1
        started = time.monotonic()
        app.request_stop("test", 0)
        answer = json.loads((await client_t.receive())[0])
        assert answer["id"] == 2 and answer["error"]["code"] == -32800
    assert result == [0]
    assert time.monotonic() - started < 1.5


def test_settings_from_env_and_argv(tmp_path: Path):
    env = {"SIDECAR_DATA_DIR": str(tmp_path / "env"), "SIDECAR_LOG_LEVEL": "DEBUG",
           "SIDECAR_PARENT_PID": "42"}
    s = parse([], env)
    assert (s.data_dir, s.log_level, s.parent_pid) == (tmp_path / "env", "debug", 42)
    s = parse(["--data-dir", str(tmp_path / "arg"), "--log-level", "error"], env)
    assert (s.data_dir, s.log_level) == (tmp_path / "arg", "error")
    assert parse([], {}).data_dir.name == "covalt-sidecar"  # the platform's per-user directory


def test_the_oauth_client_metadata_url_must_be_https_with_a_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    url = "https://app.example/oauth/client.json"
    assert parse([], {"SIDECAR_OAUTH_CLIENT_METADATA_URL": url}).oauth_client_metadata_url == url
    assert parse([], {}).oauth_client_metadata_url is None
    for bad in ("http://app.example/oauth/client.json", "https://app.example/"):
        with pytest.raises(SystemExit):
            parse(["--oauth-client-metadata-url", bad], {})
        assert "must be an https:// URL with a path" in capsys.readouterr().err


def test_the_first_answer_builds_only_the_lifecycle_models_and_the_rest_come_when_asked(tmp_path: Path):
    # Every API model costs start-up time (about 13 ms): the table serving ``initialize`` has only
    # the lifecycle methods, and learns the others when the first of them arrives.
    import subprocess
    import sys

    code = """
import json, pathlib, sys
from sidecar.app import Sidecar
from sidecar.handlers import Deferred
from sidecar.settings import Settings
table = Deferred(Sidecar(Settings(data_dir=pathlib.Path(sys.argv[1])))).table
api = lambda: sorted(m for m in sys.modules if m.startswith("sidecar.api"))
before = api()
assert table.get("initialize") is not None and table.get("ping") is not None
at_initialize = api()
found = table.get("tools/call")
print(json.dumps({"before": before, "atInitialize": at_initialize, "after": api(),
                  "toolsCall": found is not None and found.params_type is not None,
                  "unknown": table.get("no/suchMethod") is None}))
"""
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    light = ["sidecar.api", "sidecar.api.base", "sidecar.api.errors", "sidecar.api.lifecycle"]
    assert seen["before"] == light and seen["atInitialize"] == light
    assert {"sidecar.api.specs", "sidecar.api.chats", "sidecar.api.toolsets"} <= set(seen["after"])
    assert seen["toolsCall"] and seen["unknown"]
