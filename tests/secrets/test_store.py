"""The secret store: the 0600 file, the real Secret Service, and the choice between them."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import StorageError
from sidecar.secrets import known
from sidecar.secrets.store import FILE_NAME, INDEX_NAME, SecretStore, recorded_backend, write_private
from tests.keystore import SecretService, secret_service

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_file_backend_keeps_values_in_a_0600_file_across_restarts(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # the file must not rely on the umask to be private
    try:
        store = SecretStore(tmp_path, "file")
        assert store.backend == "file" and recorded_backend(tmp_path, "file") == "file"
        await store.set("OPENAI_KEY", "sk-file-value-1234\n")
        await store.set("provider:openai", "sk-internal-5678")
    finally:
        os.umask(old_umask)
    path = tmp_path / FILE_NAME
    assert mode(path) == 0o600
    assert os.listdir(tmp_path) == [FILE_NAME]  # no temporary file left behind
    again = SecretStore(tmp_path, "auto")
    assert again.backend == "file" and again.chosen
    assert await again.get("OPENAI_KEY") == "sk-file-value-1234"  # the pasted newline is gone
    assert await again.names() == ["OPENAI_KEY", "provider:openai"]
    assert await again.delete("OPENAI_KEY") is True
    assert await again.delete("OPENAI_KEY") is False
    assert json.loads(path.read_text())["secrets"] == {"provider:openai": "sk-internal-5678"}
    assert mode(path) == 0o600


async def test_a_secrets_file_others_can_read_is_made_private_again(tmp_path: Path) -> None:
    store = SecretStore(tmp_path, "file")
    await store.set("TOKEN", "t-123456")
    os.chmod(tmp_path / FILE_NAME, 0o644)
    assert await SecretStore(tmp_path).get("TOKEN") == "t-123456"
    assert mode(tmp_path / FILE_NAME) == 0o600


async def test_a_damaged_secrets_file_is_an_error_and_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    path.write_text('{"secrets": {"A": "value-kept"')
    store = SecretStore(tmp_path)
    with pytest.raises(StorageError, match="cannot be read.*fix it or move it aside"):
        await store.set("B", "other")
    with pytest.raises(StorageError):
        await store.get("A")
    assert path.read_text() == '{"secrets": {"A": "value-kept"'


async def test_without_a_keystore_the_file_is_chosen_and_recorded(tmp_path: Path) -> None:
    # tests/conftest.py points the session bus nowhere: keyring finds no keystore here.
    store = SecretStore(tmp_path)
    assert not store.chosen and recorded_backend(tmp_path) is None
    assert await store.get("NOTHING") is None and await store.names() == []
    assert not store.chosen  # reading nothing chose nothing
    await store.set("API_TOKEN", "tok-abcdef")
    assert store.backend == "file" and recorded_backend(tmp_path) == "file"
    assert mode(tmp_path / FILE_NAME) == 0o600


async def test_forcing_the_keystore_without_one_fails_and_records_nothing(tmp_path: Path) -> None:
    store = SecretStore(tmp_path, "keystore")
    with pytest.raises(StorageError, match="no OS keystore is available"):
        await store.set("API_TOKEN", "tok-abcdef")
    assert not (tmp_path / FILE_NAME).exists() and not (tmp_path / INDEX_NAME).exists()


async def test_variables_are_the_users_secrets_then_the_environment(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FROM_ENV", "env-value")
    monkeypatch.setenv("BOTH", "env-loses")
    store = SecretStore(tmp_path, "file")
    await store.set("BOTH", "store-wins")
    await store.set("provider:x", "internal")
    env = await store.environ(["BOTH", "FROM_ENV", "provider:x"])
    assert env["BOTH"] == "store-wins" and env["FROM_ENV"] == "env-value"
    assert "provider:x" not in env and "NOT_SET_ANYWHERE" not in env


async def test_a_change_is_announced_after_it_is_stored(tmp_path: Path) -> None:
    seen: list[tuple[str, str | None]] = []

    async def changed(name: str) -> None:
        seen.append((name, store.cached(name)))

    store = SecretStore(tmp_path, "file", on_change=changed)
    await store.set("A_KEY", "value-1")
    await store.delete("A_KEY")
    await store.delete("A_KEY")  # nothing to delete: nothing announced
    assert seen == [("A_KEY", "value-1"), ("A_KEY", None)]


# -- the real Secret Service ---------------------------------------------------------------------

# Runs the store in its own process: keyring picks its keystore once per process, and this one has
# none (tests/conftest.py).
DRIVER = """
import anyio, json, sys
from pathlib import Path
from sidecar.secrets.store import SecretStore
from sidecar.errors import StorageError

async def main():
    store = SecretStore(Path(sys.argv[1]), sys.argv[2])
    out = []
    for op in json.loads(sys.argv[3]):
        try:
            if op[0] == "set":
                out.append(await store.set(op[1], op[2]))
            elif op[0] == "get":
                out.append(await store.get(op[1]))
            elif op[0] == "delete":
                out.append(await store.delete(op[1]))
            elif op[0] == "names":
                out.append(await store.names())
            elif op[0] == "backend":
                out.append([await store.choose(), store.backend])
        except StorageError as exc:
            out.append({"error": exc.message})
    print(json.dumps(out))

anyio.run(main)
"""


@pytest.fixture
def keystore(tmp_path: Path) -> Iterator[SecretService]:
    with secret_service(tmp_path / "secret-service") as service:
        yield service


def drive(keystore: SecretService, data_dir: Path, *ops: list[Any], prefer: str = "auto") -> list[Any]:
    env = {**os.environ, **keystore.env}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(data_dir), prefer, json.dumps(ops)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_keystore_holds_the_values_and_the_data_directory_only_their_names(
        keystore: SecretService, tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert drive(keystore, data, ["backend"], ["set", "GITHUB_TOKEN", "ghp-keystore-value\n"],
                 ["set", "provider:openai", "sk-keystore-internal"]) == [["keystore", "keystore"], None, None]
    assert recorded_backend(data) == "keystore"
    on_disk = "".join(p.read_text() for p in data.iterdir() if p.is_file())
    assert "ghp-keystore-value" not in on_disk and "GITHUB_TOKEN" in on_disk
    values = {name: value for (_, name), value in keystore.items().items()}
    assert values == {"GITHUB_TOKEN": "ghp-keystore-value", "provider:openai": "sk-keystore-internal"}
    assert drive(keystore, data, ["get", "GITHUB_TOKEN"], ["names"], ["delete", "GITHUB_TOKEN"],
                 ["get", "GITHUB_TOKEN"]) == [
        "ghp-keystore-value", ["GITHUB_TOKEN", "provider:openai"], True, None]
    assert "GITHUB_TOKEN" not in {name for _, name in keystore.items()}


def test_two_data_directories_do_not_share_entries(keystore: SecretService, tmp_path: Path) -> None:
    drive(keystore, tmp_path / "one", ["set", "SAME_NAME", "value-one"])
    drive(keystore, tmp_path / "two", ["set", "SAME_NAME", "value-two"])
    assert drive(keystore, tmp_path / "one", ["get", "SAME_NAME"]) == ["value-one"]
    assert drive(keystore, tmp_path / "two", ["get", "SAME_NAME"]) == ["value-two"]


def test_a_locked_keystore_is_a_clear_error_with_nothing_lost_and_no_fallback(
        keystore: SecretService, tmp_path: Path) -> None:
    data = tmp_path / "data"
    drive(keystore, data, ["set", "KEPT_TOKEN", "kept-value-1"])
    keystore.lock()
    out = drive(keystore, data, ["get", "KEPT_TOKEN"], ["set", "KEPT_TOKEN", "new-value-2"],
                ["set", "NEW_TOKEN", "new-value-3"], ["backend"])
    assert all("the OS keystore is locked; unlock it" in o["error"] for o in out[:3]), out
    assert out[3] == ["keystore", "keystore"]  # still the keystore: no silent switch to the file
    assert not (data / FILE_NAME).exists()
    assert "new-value" not in json.dumps(out)
    # Gone while locked, then back (unlocked): everything as before the lock.
    keystore.stop_keyring()
    gone = drive(keystore, data, ["get", "KEPT_TOKEN"])
    assert "cannot read the secret KEPT_TOKEN: no OS keystore is available" in gone[0]["error"]
    assert not (data / FILE_NAME).exists()
    keystore.start_keyring()
    assert drive(keystore, data, ["get", "KEPT_TOKEN"], ["names"]) == ["kept-value-1", ["KEPT_TOKEN"]]


async def test_every_value_read_or_stored_is_scrubbed_from_logs_and_errors(tmp_path: Path) -> None:
    known.clear()
    store = SecretStore(tmp_path, "file")
    await store.set("PASTED", "stored-value-0001\n")
    assert known.scrub_known("x stored-value-0001 y") == "x **** y"
    (tmp_path / "other").mkdir()
    write_private(tmp_path / "other" / FILE_NAME, {"version": 1, "secrets": {"READ": "read-value-0002"}})
    known.clear()
    SecretStore(tmp_path / "other")
    assert known.scrub_known("read-value-0002") == "****"
