"""What the sandbox blocked, and which setting allows it, in words a user acts on."""

from __future__ import annotations

from pathlib import Path

from sidecar.sandbox.hints import hint
from sidecar.sandbox.policy import DEFAULT, Confinement


def test_a_read_only_write_names_the_workspace_and_sandbox_writable() -> None:
    said = hint("OSError: [Errno 30] Read-only file system: '/data/sidecar.db'", DEFAULT, "/data/chats/c/ws")
    assert said is not None and "/data/chats/c/ws" in said and "sandbox.writable" in said


def test_a_hidden_path_is_named_but_a_typo_in_the_workspace_is_not(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    hidden = tmp_path / "db.sqlite"
    hidden.write_text("x")
    said = hint(f"FileNotFoundError: [Errno 2] No such file or directory: '{hidden}'", DEFAULT, str(ws))
    assert said is not None and str(hidden) in said and "outside the tool's sandbox" in said
    assert hint(f"FileNotFoundError: [Errno 2] No such file or directory: '{ws / 'typo'}'", DEFAULT, str(ws)) is None
    assert hint("FileNotFoundError: [Errno 2] No such file or directory: '/no/such/dir/x'", DEFAULT, str(ws)) is None


def test_a_refused_connection_names_sandbox_network_unless_the_network_is_full() -> None:
    refused = "ConnectionRefusedError: [Errno 111] Connection refused"
    said = hint(refused, DEFAULT, "/ws")
    assert said is not None and "sandbox.network" in said
    assert hint(refused, Confinement(network="full"), "/ws") is None
    listed = hint(refused, Confinement(network="allowedHosts", allowed_hosts=("api.example.com",)), "/ws")
    assert listed is not None and "api.example.com" in listed
    assert hint("PermissionError: [Errno 13] Permission denied", DEFAULT, "/ws") is not None  # Landlock's TCP refusal


def test_a_shell_redirect_outside_the_workspace_names_sandbox_writable() -> None:
    said = hint("/bin/sh: 1: cannot create /etc/x: Permission denied", DEFAULT, "/ws")
    assert said is not None and "sandbox.writable" in said
    assert hint("/bin/sh: 1: cannot create sub/x: Directory nonexistent", DEFAULT, "/ws") is None
    assert hint("an ordinary failure", DEFAULT, "/ws") is None


def test_allowed_hosts_under_landlock_says_there_is_no_network_and_how_to_get_it() -> None:
    # Landlock filters TCP by port only: allowedHosts cannot be enforced, so the tool had no network.
    hosts = Confinement(network="allowedHosts", allowed_hosts=("api.example.com",))
    said = hint("PermissionError: [Errno 13] Permission denied", hosts, "/ws", "landlock")
    assert said is not None and "api.example.com" in said and "no network at all" in said
    assert "install it (the bubblewrap package)" in said and "unprivileged user namespaces" in said
    under_bwrap = hint("ConnectionRefusedError: [Errno 111] Connection refused", hosts, "/ws", "bubblewrap")
    assert under_bwrap is not None and "add the host to sandbox.allowedHosts" in under_bwrap
    assert "Landlock" not in (hint("PermissionError: [Errno 13] Permission denied", DEFAULT, "/ws", "landlock") or "")


def test_a_helper_out_of_memory_names_the_limit_and_sandbox_memory() -> None:
    quoted = "RuntimeError: a helper failed with code 1: Traceback (most recent call last):\n  File ..\nMemoryError\n"
    said = hint(quoted, Confinement(memory_bytes=64 << 20), "/ws")
    assert said is not None and "64 MiB" in said and "sandbox.memory" in said
    assert hint("OSError: [Errno 12] Cannot allocate memory", DEFAULT, "/ws") is not None
    assert hint("ValueError: no MemoryErrors here", DEFAULT, "/ws") is None
