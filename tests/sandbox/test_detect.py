"""Which sandbox is active, found by trying it; 'none' says so loudly."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox import cgroups
from sidecar.sandbox.bwrap import SANDBOX_HOME as bwrap_home
from sidecar.sandbox.detect import RECORD_FILE, Detected, Record, detect, fingerprint, recall

pytestmark = pytest.mark.anyio


def test_none_is_unconfined_with_a_warning() -> None:
    found = detect("none")
    assert found.mechanism == "none" and not found.confined
    assert found.warning and "unconfined" in found.warning


def test_bubblewrap_is_chosen_first_where_it_runs(bwrap: str) -> None:
    assert detect("auto").mechanism == "bubblewrap"


async def test_status_reports_the_sandbox_in_initialize_and_debug_info(data_dir, bwrap: str) -> None:  # noqa: ANN001
    async with SidecarClient.spawn(data_dir, initialize=False, env={"SIDECAR_SANDBOX": "none"}) as sidecar:
        init = await sidecar.request("initialize", {"clientInfo": {"name": "t", "version": "0"}})
        assert init["capabilities"]["sandbox"] == {"mechanism": "none", "confined": False}
        info = (await sidecar.request("debug/info"))["sandbox"]
        assert info["mechanism"] == "none" and "unconfined" in info["warning"]
        assert "NO SANDBOX" in sidecar.stderr_text() or "unconfined" in sidecar.stderr_text()
    async with SidecarClient.spawn(data_dir) as sidecar:
        info = (await sidecar.request("debug/info"))["sandbox"]
        assert info["mechanism"] == "bubblewrap" and info["confined"] is True and "warning" not in info
        # What enforces memory and processes: the cgroups this machine lets the sidecar use.
        assert info["limits"] == cgroups.detect().kind


INIT = {"clientInfo": {"name": "t", "version": "0"}}
HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "hostile-startup"


def forge(data_dir: Path, found: Detected, **key_changes: str) -> Path:
    """A record of a probe that found ``found`` on this machine as it is now (``key_changes``: as it was)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / RECORD_FILE
    path.write_bytes(msgspec.json.encode(Record(key=fingerprint("auto") | key_changes, found=found)))
    return path


def recorded(path: Path) -> Detected:
    return msgspec.json.decode(path.read_bytes(), type=Record).found


async def test_the_probe_is_recorded_and_a_later_start_answers_from_the_record(data_dir: Path, bwrap: str) -> None:
    async with SidecarClient.spawn(data_dir, initialize=False) as sidecar:
        init = await sidecar.request("initialize", INIT)
        assert init["capabilities"]["sandbox"] == {"mechanism": "bubblewrap", "confined": True}
        await sidecar.request("debug/info")  # the probe has finished by its answer
    assert recorded(data_dir / RECORD_FILE).mechanism == "bubblewrap"
    # A record that does not match this machine (another kernel, here) is not believed.
    path = forge(data_dir, Detected(mechanism="none", warning="forged"), kernel="2.6.32 #1 SMP i686")
    async with SidecarClient.spawn(data_dir, initialize=False) as sidecar:
        init = await sidecar.request("initialize", INIT)
        assert init["capabilities"]["sandbox"] == {"mechanism": "bubblewrap", "confined": True}
        await sidecar.request("debug/info")
        assert not [n for n in sidecar.notifications if n["method"] == "sandbox/changed"]
    assert recorded(path).mechanism == "bubblewrap"


async def test_a_record_the_probe_contradicts_is_rewritten_announced_and_never_confines_a_tool(
        data_dir: Path, bwrap: str) -> None:
    # The record claims no sandbox on a machine that has bubblewrap: initialize believes it (it
    # cannot wait for the probe), the probe after the answer corrects it, and tools never ran on it.
    path = forge(data_dir, Detected(mechanism="none", warning="forged: no sandbox"))
    async with SidecarClient.spawn(data_dir, initialize=False) as sidecar:
        init = await sidecar.request("initialize", INIT)
        assert init["capabilities"]["sandbox"] == {"mechanism": "none", "confined": False}
        await sidecar.request("toolsets/import", {"path": str(HOSTILE)})
        chat = (await sidecar.request("chats/create", {"title": "t"}))["chat"]["id"]
        here = (await sidecar.request("tools/call", {"toolId": "hostile-startup:where", "args": {},
                                                     "chatId": chat}))["toolCall"]["result"]
        assert here["home"] == bwrap_home, here  # inside bubblewrap's own /tmp: confined
        changed = await sidecar.wait_notification("sandbox/changed")
        assert changed["params"] == {"sandbox": {"mechanism": "bubblewrap", "confined": True}}
        assert "not none as initialize reported" in sidecar.stderr_text()
        assert (await sidecar.request("debug/info"))["sandbox"]["mechanism"] == "bubblewrap"
    assert recorded(path).mechanism == "bubblewrap"


def test_the_fingerprint_follows_the_bwrap_program_and_the_choice(tmp_path: Path, bwrap: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = fingerprint("auto")
    assert fingerprint("auto") == before and fingerprint("landlock") != before
    own = tmp_path / "bin" / "bwrap"
    own.parent.mkdir()
    own.write_bytes(Path(bwrap).read_bytes())
    own.chmod(0o755)
    monkeypatch.setenv("PATH", f"{own.parent}{os.pathsep}{os.environ['PATH']}")
    assert fingerprint("auto")["bwrap"] != before["bwrap"]  # another bwrap: probe again
    after = fingerprint("auto")
    own.write_bytes(own.read_bytes() + b"\0")  # upgraded in place
    assert fingerprint("auto")["bwrap"] != after["bwrap"]


def test_a_damaged_or_foreign_record_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / RECORD_FILE
    assert recall("auto", path) is None
    path.write_text("{not json")
    assert recall("auto", path) is None
    path.write_bytes(msgspec.json.encode(Record(key=fingerprint("auto"), found=Detected(mechanism="landlock"))))
    assert recall("auto", path) == Detected(mechanism="landlock")
    assert recall("none", path) is None  # recorded for another --sandbox choice
