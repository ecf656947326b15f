"""What to tell the user when the sandbox stopped a tool: which setting would have allowed it.

A tool sees the sandbox only as ordinary errors (a read-only file system, a path that does not
exist, a refused connection, a process out of memory). The sidecar reads them from the tool's error
or output and adds what was blocked and which setting widens it (``sandbox.writable``,
``sandbox.network``, ``sandbox.memory``). And before it runs: the warnings a confinement earns
(``warnings_of``), which a tool's limits, an MCP server's and a bundle's inspection show.
"""

from __future__ import annotations

import os
import re

from ..api.limits import LimitWarning
from .policy import Confinement, format_size, widenings

_PATH_ERROR = re.compile(r"\[Errno (\d+)\] [^:'\n]*: '([^'\n]+)'")
_READ_ONLY = ("Read-only file system", "[Errno 30]")
_NETWORK = ("[Errno 111]", "Connection refused", "[Errno 101]", "Network is unreachable", "[Errno 99]",
            "Cannot assign requested address", "[Errno -3]", "Temporary failure in name resolution",
            "[Errno -2]", "Name or service not known", "[Errno -5]", "No address associated with hostname")
# A shell's redirection: "/bin/sh: 1: cannot create /x/y: Permission denied".
_SHELL_WRITE = re.compile(r"cannot create ([^:\n]+): (?:Permission denied|Directory nonexistent)")
# Landlock refuses a TCP connect or bind with EACCES, without a path.
_DENIED_CONNECT = re.compile(r"\[Errno 13\] Permission denied(?!: ')")
_OUT_OF_MEMORY = re.compile(r"\bMemoryError\b|Cannot allocate memory|\[Errno 12\]")


def hint(text: str, confinement: Confinement, workspace: str | None, mechanism: str | None = None) -> str | None:
    """The sentence to add to ``text`` (a tool's error or a command's output), or None. ``mechanism``:
    what confined the tool (detect.Mechanism), for what it could not enforce as asked."""
    if any(marker in text for marker in _READ_ONLY):
        return writable_hint(workspace)
    for match in _PATH_ERROR.finditer(text):
        code, path = int(match[1]), match[2]
        # Only a path the sidecar sees but the sandbox hid: a plain typo gets no hint.
        if (code in (2, 13) and os.path.isabs(path) and not _inside(path, workspace, confinement.writable)
                and (os.path.lexists(path) or os.path.isdir(os.path.dirname(path)))):
            return (f"{path} is outside the tool's sandbox, which shows it the system, its toolset and "
                    f"its chat's workspace only. {writable_hint(workspace)}")
    for match in _SHELL_WRITE.finditer(text):
        if not _inside(os.path.join(workspace or "/", match[1]), workspace, confinement.writable):
            return writable_hint(workspace)
    if confinement.network != "full" and (any(m in text for m in _NETWORK) or _DENIED_CONNECT.search(text)):
        return network_hint(confinement, mechanism)
    if _OUT_OF_MEMORY.search(text):
        # A process the tool started hit its memory rlimit (a MemoryError in its stderr, which the
        # tool quoted): the tool's own MemoryError is already a memory-limit failure, not a hint.
        return (f"A process of this tool ran out of memory: each process of a call may use "
                f"{format_size(confinement.memory_bytes)}; the setting sandbox.memory raises it.")
    return None


# Where a program names a path it could not open: Python's interpreter and OSError, Node's loader
# and fs, a shell, bubblewrap's exec.
_SERVER_PATHS = (
    re.compile(r"can't open file '([^'\n]+)': \[Errno (?:2|13)\]"),
    re.compile(r"Cannot find module '([^'\n]+)'"),
    re.compile(r"(?:ENOENT|EACCES|EPERM)[^,\n]*, \w+ '([^'\n]+)'"),
    re.compile(r"\[Errno (?:2|13)\] [^:'\n]*: '([^'\n]+)'"),
    re.compile(r"execvp ([^:\n]+): (?:No such file|Permission denied)"),
    re.compile(r"(?:^|\n)[^\n:]*: (?:\d+: )?([^:\n]+): (?:not found|Permission denied|No such file)"),
)


def server_hint(text: str, confinement: Confinement, mechanism: str | None, shown: list[str]) -> str | None:
    """What to add to the error of a sandboxed MCP server that ``text`` (its stderr) says the sandbox
    stopped: a file outside what it is shown (``shown``: the folders it reads besides the system), a
    write outside its private /tmp, a refused connection. None when nothing there points at the sandbox."""
    for pattern in _SERVER_PATHS:
        for match in pattern.finditer(text):
            path = match[1].strip()
            if (os.path.isabs(path) and not _inside(path, None, (*shown, *confinement.writable))
                    and (os.path.lexists(path) or os.path.isdir(os.path.dirname(path)))):
                return (f"{path} is outside the server's sandbox, which shows it the system, the sidecar's "
                        "Python, its command's folder, its script's project and its working folder (cwd), "
                        "read-only: set cwd to the folder it needs, list that folder in sandbox.writable (the "
                        "server may then also write there), or run it without sandbox")
    if any(marker in text for marker in _READ_ONLY) or _SHELL_WRITE.search(text):
        return ("The sandbox lets this server write only in its private /tmp (its HOME is there too); the setting "
                "sandbox.writable allows more folders")
    if confinement.network != "full" and (any(m in text for m in _NETWORK) or _DENIED_CONNECT.search(text)
                                          or "ENOTFOUND" in text or "EAI_AGAIN" in text or "ECONNREFUSED" in text):
        return network_hint(confinement, mechanism).replace("this tool", "this server").rstrip(".")
    return None


def writable_hint(workspace: str | None) -> str:
    where = f"its chat's workspace ({workspace})" if workspace else "its chat's workspace"
    return (f"The sandbox lets a tool write only in {where}; the setting sandbox.writable "
            "(in toolset.yaml or the user's override) allows more paths.")


def network_hint(confinement: Confinement, mechanism: str | None = None) -> str:
    if confinement.network == "allowedHosts" and mechanism == "landlock":
        return landlock_hosts_note(confinement)
    if confinement.network == "allowedHosts":
        hosts = ", ".join(confinement.allowed_hosts) or "no host"
        return (f"The sandbox lets this tool reach only {hosts}; add the host to sandbox.allowedHosts or "
                "set sandbox.network to full.")
    return ("The sandbox gives this tool no network (sandbox.network: none); set sandbox.network to "
            "allowedHosts (with sandbox.allowedHosts) or full to allow connections.")


def landlock_hosts_note(confinement: Confinement) -> str:
    """Why a tool with ``network: allowedHosts`` has no network under Landlock, and how to get it."""
    hosts = ", ".join(confinement.allowed_hosts) or "no host"
    return (f"This tool may reach {hosts} (sandbox.network: allowedHosts), but the sandbox here is Landlock, "
            "which filters TCP by port, not by address, so it cannot hold a tool to some hosts: the tool gets "
            "no network at all. allowedHosts works under bubblewrap: install it (the bubblewrap package) and "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
            "and later kernel.apparmor_restrict_unprivileged_userns=0), then restart; or set sandbox.network "
            "to full.")


def _inside(path: str, workspace: str | None, writable: tuple[str, ...]) -> bool:
    path = os.path.normpath(path)
    for root in (*([workspace] if workspace else []), *writable):
        root = os.path.normpath(root)
        if path == root or path.startswith(root + os.sep):
            return True
    return False


def warnings_of(c: Confinement, tool_id: str | None = None, mechanism: str | None = None, *,
                server: str | None = None) -> list[LimitWarning]:
    """What ``c`` allows beyond seed 004's defaults, as the wire shows it (``mechanism``: what confines
    tools here; Landlock cannot hold a tool to some hosts, which earns a warning of its own)."""
    found = [LimitWarning(setting=w.field, message=w.message, tool_id=tool_id, server=server) for w in widenings(c)]
    if mechanism == "landlock" and c.network == "allowedHosts":
        found.append(LimitWarning(setting="sandbox.network", message=landlock_hosts_note(c), tool_id=tool_id,
                                  server=server))
    return found
