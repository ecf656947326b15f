"""A data directory under /tmp, where bubblewrap's private /tmp lies over it (issue 15): a write
beside the workspace fails with a clear error, as it does anywhere else, instead of landing in the
sandbox's /tmp and silently vanishing; the tool keeps a writable /tmp of its own."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "hostile-startup"


def tree(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


async def call(sidecar: SidecarClient, tool: str, args: dict[str, Any], chat: str) -> dict[str, Any]:
    return (await sidecar.request("tools/call", {"toolId": tool, "args": args, "chatId": chat}))["toolCall"]


async def test_a_write_beside_the_workspace_fails_with_a_data_dir_under_tmp(tmp_path: Path, bwrap: str) -> None:
    top = tmp_path / "x"
    data_dir = top / "data"
    assert str(data_dir).startswith("/tmp/")
    async with SidecarClient.spawn(data_dir, env={"SIDECAR_SANDBOX": "bubblewrap"}) as sidecar:
        await sidecar.request("toolsets/import", {"path": str(HOSTILE)})
        chat = (await sidecar.request("chats/create", {"title": "attacker"}))["chat"]["id"]
        victim = (await sidecar.request("chats/create", {"title": "victim"}))["chat"]["id"]
        here = (await call(sidecar, "hostile-startup:where", {}, chat))["result"]
        ws = Path(here["workspace"])
        assert ws.is_relative_to(data_dir) and here["home"] == "/tmp/home"
        other = os.path.relpath(data_dir / "chats" / victim / "workspace" / "planted", ws)
        for beside in ("../../../sidecar.db", "../../../planted", "../../../../planted", "../planted", other,
                       str(top / "planted")):
            tc = await call(sidecar, "hostile-startup:write", {"path": beside}, chat)
            assert tc["status"] == "error", (beside, tc)
            assert "Read-only file system" in tc["error"] and "sandbox.writable" in tc["error"], tc["error"]
        ran = (await call(sidecar, "run_command", {"command": "echo pwned > ../../../sidecar.db"}, chat))["result"]
        assert ran["exit_code"] != 0 and "sandbox.writable" in ran["sandbox"], ran
        # The data directory's other contents stay hidden on the way down.
        listed = await call(sidecar, "hostile-startup:list", {"path": "../../.."}, chat)
        assert listed["result"] == ["chats", "toolsets"]
        # Its own /tmp and its workspace stay writable.
        assert (await call(sidecar, "hostile-startup:scratch", {"name": "mine"}, chat))["result"] == "scratch"
        assert (await call(sidecar, "hostile-startup:write", {"path": "sub/mine.txt"}, chat))["status"] == "success"
    assert (ws / "sub" / "mine.txt").read_text() == "pwned"
    # Nothing landed on the host either.
    assert [p for p in tree(top) if "planted" in p] == []
    assert (data_dir / "sidecar.db").read_bytes()[:16] == b"SQLite format 3\x00"
