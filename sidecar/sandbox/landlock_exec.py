"""Run a program under Landlock: ``python -I landlock_exec.py <rules JSON> <program> [args...]``.

The fallback where bubblewrap cannot run. A script, not a module of the ``sidecar`` package (only
the standard library): the rules are applied to this process, which then becomes the program
(exec), so nothing of the sidecar is in it. ``<rules>``::

    {"read": ["/usr", ...], "write": ["/abs/workspace", ...], "network": "none"|"allowedHosts"|"full"}

What it confines (this first version): files (read and execute only below ``read``, everything
below ``write``, nothing elsewhere), TCP bind and connect unless ``network`` is "full" (kernel ABI
4+), and signals and abstract unix sockets to processes outside the sandbox (ABI 6+). Not
confined: UDP (DNS over UDP still leaves), the process list (the pids of other processes can be
signalled only below ABI 6 and found with kill(pid, 0); /proc shows the program only its own entry),
and mounts. no_new_privs is set, so setuid programs gain nothing.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FILE_RIGHTS = {1: EXECUTE | WRITE_FILE | READ_FILE, 3: 1 << 14, 5: 1 << 15}  # rights a rule on a file may hold
ABI_FS = {1: (1 << 13) - 1, 2: 1 << 13, 3: 1 << 14, 5: 1 << 15}  # rights each ABI adds
READ = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _rights(table: dict[int, int], abi: int) -> int:
    return sum(bits for since, bits in table.items() if abi >= since)


def _expand(paths: list[str]) -> list[str]:
    """"/proc" stands for this process's own entry (its pid survives the exec) and a few system
    files: the whole of /proc would show other processes' environment, the sidecar's included."""
    out: list[str] = []
    for path in paths:
        if path == "/proc":
            out += [f"/proc/{os.getpid()}", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/filesystems"]
        else:
            out.append(path)
    return out


def confine(rules: dict[str, object]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(CREATE_RULESET, None, 0, 1)
    if abi < 1:
        raise OSError(ctypes.get_errno(), "Landlock is not available")
    all_fs = _rights(ABI_FS, abi)
    file_rights = _rights(FILE_RIGHTS, abi)
    attr = RulesetAttr(handled_access_fs=all_fs)
    size = 8
    if abi >= 4:
        size = 16
        if rules.get("network") != "full":
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP  # and no rule: no TCP at all
    if abi >= 6:
        size = 24
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    for key, access in (("read", READ), ("write", all_fs)):
        for path in _expand(rules.get(key, ())):  # type: ignore[arg-type]  # JSON from the sidecar
            try:
                fd = os.open(str(path), os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this system lacks
            try:
                allowed = access if os.path.isdir(path) else access & file_rights
                rule = PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
                if libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")
    if libc.syscall(RESTRICT_SELF, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit(f"usage: {argv[0]} <rules JSON> <program> [args...]")
    try:
        confine(json.loads(argv[1]))
    except OSError as exc:
        sys.exit(f"covalt sandbox: cannot apply Landlock rules: {exc}")
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        sys.exit(f"covalt sandbox: cannot run {argv[2]}: {exc}")


if __name__ == "__main__":
    main(sys.argv)
