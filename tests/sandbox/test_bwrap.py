"""The bubblewrap command line: what a confined tool is shown, and what never."""

from __future__ import annotations

import os
from pathlib import Path

from sidecar.sandbox import bwrap

PY = ["/usr/bin/python3", "-I", "worker.py"]


def fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for folder in ("usr/lib", "usr/bin", "etc/ssl", "home/ada/.ssh"):
        (root / folder).mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    for name in ("passwd", "ld.so.cache", "resolv.conf", "shadow", "sudoers"):
        (root / "etc" / name).write_text("x")
    return root


def binds_of(argv: list[str]) -> dict[str, str]:
    """destination -> the option that put it there."""
    found: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] in ("--ro-bind", "--bind", "--symlink"):
            found[argv[i + 2]] = argv[i]
            i += 3
        else:
            i += 1
    return found


def test_every_namespace_is_new_and_the_network_only_when_full(tmp_path: Path) -> None:
    root = str(fake_root(tmp_path))
    none = bwrap.command("/usr/bin/bwrap", PY, binds=bwrap.Binds(), network="none", cwd="/w", root=root)
    assert none[:2] == ["/usr/bin/bwrap", "--unshare-all"] and "--share-net" not in none
    for flag in ("--die-with-parent", "--new-session"):
        assert flag in none
    assert none[none.index("--cap-drop") + 1] == "ALL"
    assert none[none.index("--") + 1:] == PY
    full = bwrap.command("/usr/bin/bwrap", PY, binds=bwrap.Binds(), network="full", cwd="/w", root=root)
    assert "--share-net" in full
    # Name resolution is there only with a network to resolve on.
    assert "/etc/resolv.conf" not in binds_of(none) and binds_of(full)["/etc/resolv.conf"] == "--ro-bind"


def test_the_system_is_read_only_and_secrets_of_etc_and_home_are_absent(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    argv = bwrap.command("/usr/bin/bwrap", PY, binds=bwrap.Binds(), network="none", cwd="/w", root=str(root))
    binds = binds_of(argv)
    assert binds["/usr"] == "--ro-bind" and binds["/lib"] == "--symlink"
    assert binds["/etc/passwd"] == "--ro-bind" and binds["/etc/ssl"] == "--ro-bind"
    for never in ("/etc/shadow", "/etc/sudoers", "/home", "/home/ada", "/root"):
        assert never not in binds
    assert argv[argv.index("--remount-ro") + 1] == "/"


def test_the_workspace_is_writable_even_inside_a_read_only_folder(tmp_path: Path) -> None:
    ws = "/data/chats/c1/workspace"
    argv = bwrap.command("/usr/bin/bwrap", PY, network="none", cwd=ws, root=str(fake_root(tmp_path)),
                         binds=bwrap.Binds(read_only=("/data/chats", "/toolsets/x"), writable=(ws, "/srv/out")))
    binds = binds_of(argv)
    assert binds[ws] == "--bind" and binds["/srv/out"] == "--bind" and binds["/toolsets/x"] == "--ro-bind"
    # mounted after the folder that holds it, or the folder would hide it
    assert argv.index(ws) > argv.index("/data/chats")
    assert argv[argv.index("--chdir") + 1] == ws
    assert os.path.dirname(ws) not in binds


def test_the_way_to_a_workspace_in_tmp_is_a_read_only_tmpfs_that_shows_nothing(tmp_path: Path) -> None:
    # A data directory under /tmp: the sandbox's own /tmp would hold the folders on the way to the
    # workspace, writable, so ../../sidecar.db would land there and vanish instead of failing.
    ws = "/tmp/x/data/chats/c1/workspace"
    argv = bwrap.command("/usr/bin/bwrap", PY, network="none", cwd=ws, root=str(fake_root(tmp_path)),
                         binds=bwrap.Binds(read_only=("/tmp/x/data/toolsets/t", "/tmp/clone", "/tmp/clone/.venv"),
                                           writable=(ws, "/tmp/home/ada/out")))
    options = argv[:argv.index("--")]
    pairs = list(zip(options, options[1:], strict=False))
    assert ("--tmpfs", "/tmp/x") in pairs and ("--remount-ro", "/tmp/x") in pairs
    assert options.index("/tmp/x") < options.index(ws) < len(options) - options[::-1].index("/tmp/x")
    # Nothing of the real /tmp/x is bound: not the database, not another chat.
    assert not [p for p in binds_of(argv) if p in ("/tmp/x", "/tmp/x/data", "/tmp/x/data/chats")]
    # A bound folder is itself (not shadowed); the tool's home stays writable, the way below it not.
    assert ("--tmpfs", "/tmp/clone") not in pairs and ("--remount-ro", "/tmp/clone") not in pairs
    assert ("--tmpfs", "/tmp/home/ada") in pairs and ("--remount-ro", "/tmp/home") not in pairs
    assert ("--tmpfs", "/tmp") in pairs and ("--remount-ro", "/tmp") not in pairs  # the tool's own /tmp
