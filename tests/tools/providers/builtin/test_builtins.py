"""The built-in tools on a real folder: what a model asking for files and commands gets back."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from sidecar.tools.providers.builtin import BUILTINS, BuiltinCall, BuiltinError

pytestmark = pytest.mark.anyio


async def run(name: str, workspace: Path, timeout: float = 10.0, **args: object) -> dict:
    return await BUILTINS[name].run(BuiltinCall(workspace, args, timeout))


async def test_write_read_list_delete_round_trip(tmp_path: Path) -> None:
    out = await run("write_file", tmp_path, path="src/app.py", content="print('hi')\n")
    assert out == {"path": "src/app.py", "size": 12, "created": True}
    assert (await run("write_file", tmp_path, path="src/app.py", content="x"))["created"] is False
    read = await run("read_file", tmp_path, path="src/app.py")
    assert read["content"] == "x" and read["encoding"] == "utf-8" and not read["truncated"]
    listing = await run("list_files", tmp_path)
    assert listing["files"] == [{"path": "src/app.py", "size": 1}]
    assert "`src/app.py`" in listing["listing"]
    assert (await run("delete_file", tmp_path, path="src"))["deleted"] == "folder"
    assert list(tmp_path.iterdir()) == []


async def test_binary_files_travel_as_base64(tmp_path: Path) -> None:
    await run("write_file", tmp_path, path="logo.bin", content="AAEC/w==", encoding="base64")
    assert (tmp_path / "logo.bin").read_bytes() == b"\x00\x01\x02\xff"
    read = await run("read_file", tmp_path, path="logo.bin")
    assert read["encoding"] == "base64" and read["content"] == "AAEC/w=="


async def test_read_window_reports_truncation(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("a" * 100)
    read = await run("read_file", tmp_path, path="big.txt", offset=10, limit=20)
    assert read["content"] == "a" * 20 and read["truncated"] and read["size"] == 100


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../b", "C:\\x", "a\x00b"])
async def test_paths_leaving_the_workspace_are_refused(tmp_path: Path, path: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(BuiltinError):
        await run("write_file", ws, path=path, content="x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


async def test_symlink_out_of_the_workspace_is_not_followed(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, ws / "link")
    with pytest.raises(BuiltinError, match="link"):
        await run("write_file", ws, path="link/new.txt", content="x")
    with pytest.raises(BuiltinError):
        await run("read_file", ws, path="link/secret.txt")
    assert not (outside / "new.txt").exists()
    assert (await run("list_files", ws))["files"] == []


async def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "bashrc"
    ws.mkdir()
    outside.write_text("keep me")
    (ws / "foo").write_text("old")
    os.symlink(outside, ws / ".foo.sidecar-tmp")
    os.symlink(outside, ws / ".new.sidecar-tmp")
    await run("write_file", ws, path="foo", content="x")
    await run("write_file", ws, path="new", content="y")
    assert outside.read_text() == "keep me"
    assert (ws / "foo").read_text() == "x" and (ws / "new").read_text() == "y"


async def test_missing_file_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BuiltinError, match="list_files"):
        await run("read_file", tmp_path, path="nope.txt")
    with pytest.raises(BuiltinError, match="does not exist"):
        await run("delete_file", tmp_path, path="nope.txt")


async def test_run_command_in_the_workspace_with_exit_code_and_output(tmp_path: Path) -> None:
    out = await run("run_command", tmp_path, command="pwd; echo oops >&2; touch made.txt; exit 3")
    assert out["exit_code"] == 3
    assert str(tmp_path) in out["output"] and "oops" in out["output"]
    assert (tmp_path / "made.txt").exists()


async def test_run_command_does_not_see_the_sidecars_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    out = await run("run_command", tmp_path, command="env")
    assert "sk-very-secret" not in out["output"] and "PATH=" in out["output"]


async def test_run_command_timeout_stops_it_and_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "late.txt"
    with pytest.raises(BuiltinError) as info:
        await run("run_command", tmp_path, command=f"echo started; (sleep 2; touch {marker}) & sleep 30",
                  timeout=0.5)
    assert info.value.kind == "timeout"
    assert "started" in info.value.result["output"]
    await anyio.sleep(2.5)
    assert not marker.exists()  # the background child went down with the group


async def test_run_command_keeps_start_and_end_of_huge_output(tmp_path: Path) -> None:
    out = await run("run_command", tmp_path, command="echo FIRST; head -c 2000000 /dev/zero | tr '\\0' x; echo; echo LAST")
    assert out["output"].startswith("FIRST") and out["output"].rstrip().endswith("LAST")
    assert "bytes of output left out" in out["output"] and len(out["output"]) < 200_000


async def test_run_command_returns_when_a_background_child_keeps_the_pipe(tmp_path: Path) -> None:
    started = time.monotonic()
    out = await run("run_command", tmp_path, command="sleep 30 & echo done", timeout=20)
    assert out["exit_code"] == 0 and "done" in out["output"]
    assert time.monotonic() - started < 15  # not held until the timeout by the child's open pipe


async def test_cancelling_run_command_stops_the_process(tmp_path: Path) -> None:
    marker = tmp_path / "late.txt"
    with anyio.move_on_after(0.5):
        await run("run_command", tmp_path, command=f"sleep 2; touch {marker}")
    await anyio.sleep(2.2)
    assert not marker.exists()
