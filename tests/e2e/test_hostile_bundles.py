"""Bundles and configs that attack the parser or the threads (issue 18 item 6), against the real
process: each is refused with a clear error, nothing of it is left on disk, and the sidecar stays
up and answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.toolsets.hostile import deep_yaml, fifos, overlapping_zip
from tests.toolsets.test_bundle import example_entries, make_zip

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"
INVALID_BUNDLE = -32013


async def refused(sidecar: SidecarClient, method: str, params: dict, code: int = INVALID_BUNDLE) -> dict:
    reply = await sidecar.request_raw(method, params)
    assert "error" in reply, reply
    assert reply["error"]["code"] == code, reply["error"]
    return reply["error"]


async def test_a_manifest_nested_25000_levels_is_refused_by_inspect_import_and_the_follower(
        sidecar: SidecarClient, tmp_path: Path, data_dir: Path):
    deep = tmp_path / "deep"
    shutil.copytree(EXAMPLE, deep)
    (deep / "toolset.yaml").write_bytes(deep_yaml())  # 50 KiB: libyaml's composer overflowed the C stack
    zipped = make_zip(tmp_path / "deep.zip", example_entries() | {"toolset.yaml": deep_yaml()})
    for method, path in (("toolsets/inspect", deep), ("toolsets/import", deep), ("toolsets/import", zipped)):
        error = await refused(sidecar, method, {"path": str(path)})
        assert error["data"]["path"] == "toolset.yaml: line 1" and "nested more than 64" in error["data"]["reason"]
        assert await sidecar.request("ping") == {}
    assert not (data_dir / "toolsets").exists() or not any((data_dir / "toolsets").iterdir())

    # The follower reads an edited local toolset with no request at all.
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    await sidecar.request("toolsets/import", {"path": str(folder)})
    await sidecar.wait_for(lambda: True, 0.3)  # let the watcher settle before the edit
    (folder / "toolset.yaml").write_bytes(deep_yaml())
    failed = await sidecar.wait_notification("toolsets/changed", lambda p: p["change"] == "reloadFailed")
    assert "nested more than 64" in failed["params"]["error"]
    assert await sidecar.request("ping") == {}
    assert sidecar.proc.returncode is None
    kept = await sidecar.request("toolsets/get", {"id": "app-builder"})  # the last good version serves
    assert "app-builder:write_file" in [t["id"] for t in kept["tools"]]


async def test_fifos_in_folder_toolsets_neither_hang_inspect_nor_starve_workspace_requests(
        sidecar: SidecarClient, tmp_path: Path):
    folders = []
    for i in range(45):  # more than the 40 threads every workspace operation shares
        folder = tmp_path / f"ts{i}"
        shutil.copytree(EXAMPLE, folder)
        fifos(folder / "tools", 1)
        folders.append(folder)
    chat = (await sidecar.request("chats/create", {"title": "t"}))["chat"]
    errors: list[dict] = []

    async def inspect(folder: Path) -> None:
        errors.append(await refused(sidecar, "toolsets/inspect", {"path": str(folder)}))

    async with anyio.create_task_group() as tg:
        for folder in folders:
            tg.start_soon(inspect, folder)
        await sidecar.request("workspace/writeFile", {"chatId": chat["id"], "path": "a.txt", "text": "still here"})
        files = await sidecar.request("workspace/files", {"chatId": chat["id"]})
    assert [f["path"] for f in files["files"]] == ["a.txt"]
    assert len(errors) == 45
    assert all(e["data"]["path"] == "tools/pipe0.py" and "named pipe" in e["data"]["reason"] for e in errors)


async def test_a_file_and_a_folder_of_one_name_is_invalid_bundle_with_nothing_left(
        sidecar: SidecarClient, tmp_path: Path, data_dir: Path):
    clash = make_zip(tmp_path / "clash.zip", example_entries() | {"tools": b"not a folder"})
    error = await refused(sidecar, "toolsets/import", {"path": str(clash)})
    assert error["data"]["path"] == "tools" and "needs a folder of that name" in error["data"]["reason"]
    assert not (data_dir / "toolsets" / "app-builder").exists()

    # Refused later, by the worker that loads the tools: the revision's folder goes with it.
    failing = make_zip(tmp_path / "failing.zip", example_entries() | {
        "tools/shell.py": b"raise RuntimeError('no import for you')\ndef run_command(): pass\n"})
    error = await refused(sidecar, "toolsets/import", {"path": str(failing)})
    assert "no import for you" in error["message"] + json.dumps(error.get("data"))
    assert not (data_dir / "toolsets" / "app-builder").exists()
    assert (await sidecar.request("toolsets/list"))["toolsets"] == []


async def test_a_zip_of_overlapping_entries_is_refused_before_it_inflates(sidecar: SidecarClient, tmp_path: Path):
    bomb = overlapping_zip(tmp_path / "overlap.zip", example_entries())
    for method in ("toolsets/inspect", "toolsets/import"):
        error = await refused(sidecar, method, {"path": str(bomb)})
        assert "overlaps" in error["data"]["reason"]
    assert await sidecar.request("ping") == {}


async def test_mcp_configs_too_deep_too_big_or_not_files_are_invalid_params(sidecar: SidecarClient, tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"mcpServers": {"a": ' + '{"x": ' * 3_000 + "1" + "}" * 3_000 + "}}")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"mcpServers": {f"s{i}": {"command": "x", "args": ["a" * 40]} for i in range(50_000)}}))
    pipe = tmp_path / "pipe.json"
    fifos(tmp_path, 1)[0].rename(pipe)
    for path, says in ((deep, "nested more than 64"), (big, "larger than 1 MiB"), (pipe, "not a regular file")):
        error = await refused(sidecar, "mcpServers/importPreview", {"path": str(path)}, code=-32602)
        assert error["data"]["path"] == "params.path" and says in error["message"], error
    assert await sidecar.request("ping") == {}
