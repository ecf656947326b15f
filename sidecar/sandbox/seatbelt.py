"""The macOS sandbox: a Seatbelt profile (SBPL) generated from a Confinement, run with ``sandbox-exec``.

UNTESTED HERE: the sidecar's machines run Linux; the unit tests check the text this module
generates, not what macOS does with it. ``sandbox-exec`` is deprecated by Apple but still ships
(and is what Chrome, Bazel and other tools use); the kernel side (Seatbelt) is the App Sandbox's.

What the profile allows, everything else being denied (``(deny default)``):

- reading the system (``/usr``, ``/bin``, ``/sbin``, ``/System``, ``/Library/Frameworks``,
  ``/Library/Developer/CommandLineTools``, ``/opt/homebrew``, ``/private/etc``, the dyld cache,
  the time zone database), the toolset's folder and the interpreter's prefixes (``read_only``);
  the metadata (``stat``) of any path, which path resolution needs, but never a directory listing
  or a file's content outside those;
- reading and writing the chat's workspace and ``confinement.writable``; ``/dev/null``,
  ``/dev/zero`` and the random devices;
- forking and executing (the program's children stay in the sandbox), signals and process
  information only within the sandbox (never the sidecar's pid), POSIX semaphores
  (multiprocessing), the user database (``getpwuid``), reading sysctls;
- the network per ``confinement.network``: ``none`` nothing at all (not even DNS); ``full``
  everything; ``allowedHosts`` only ``localhost:<proxy_port>``, the sidecar's filtering proxy
  (sidecar/sandbox/egress.py), with the proxy variables pointing at it.

What Seatbelt cannot do: count processes or bound memory or disk use. Those rest on rlimits, which
macOS honours less than Linux: RLIMIT_NPROC counts every process of the user, not the tool's, and
macOS does not enforce RLIMIT_DATA or RLIMIT_AS; ``max_processes`` of 1 is the one process rule
SBPL expresses (no ``process-fork``).

Paths never enter the profile's text: each one is a parameter (``-D WRITE_0=/path``) that the
profile names (``(param "WRITE_0")``), so a path containing ``")`` or a line break is data, never
SBPL. Paths are made canonical (``/tmp`` is ``/private/tmp`` on macOS, and Seatbelt compares the
resolved path).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from .policy import Confinement

SANDBOX_EXEC = "/usr/bin/sandbox-exec"  # an absolute path: PATH is not trusted to find it

SYSTEM_READ = ("/usr", "/bin", "/sbin", "/System", "/Library/Frameworks", "/Library/Developer/CommandLineTools",
               "/opt/homebrew", "/private/etc", "/private/var/db/dyld", "/private/var/db/timezone")
_DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper")

_BASE = """\
(version 1)
(deny default)

; the tool's children run under this same profile
(allow process-exec)
{fork}
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow ipc-posix-sem)
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow file-read-metadata)
(allow file-read* file-write-data file-ioctl
{devices})
"""


@dataclass(frozen=True, slots=True)
class Profile:
    """A generated profile and the parameters it names; ``argv`` runs a command under it."""

    text: str
    params: dict[str, str]

    def argv(self, command: Sequence[str]) -> list[str]:
        if not command or not os.path.isabs(command[0]):
            raise ValueError("the sandboxed program must be given by its absolute path")
        defines = [arg for key, value in self.params.items() for arg in ("-D", f"{key}={value}")]
        return [SANDBOX_EXEC, "-p", self.text, *defines, *command]


def profile(confinement: Confinement, *, workspace: str | None, toolset: str | None = None,
            read_only: Sequence[str] = (), proxy_port: int | None = None) -> Profile:
    """The profile for one tool process. ``workspace`` None: no workspace (a ``describe`` worker).
    ``read_only``: the interpreter's prefixes and anything else the program must read.
    ``proxy_port``: where the sidecar's filtering proxy listens on loopback (``allowedHosts``).

    Raises ValueError for a path that is not absolute or holds a control character, and for
    ``allowedHosts`` without a proxy port.
    """
    params: dict[str, str] = {}

    def param(prefix: str, path: str) -> str:
        key = f"{prefix}_{sum(k.startswith(prefix + '_') for k in params)}"
        params[key] = _canonical(path)
        return f'(subpath (param "{key}"))'

    read = [param("READ", path) for path in (*SYSTEM_READ, *([toolset] if toolset else []), *read_only)]
    write = [param("WRITE", path) for path in (*([workspace] if workspace else []), *confinement.writable)]
    rules = [_BASE.format(fork="(allow process-fork)" if confinement.max_processes > 1 else
                          "; one process: no fork",
                          devices="\n".join(f'  (literal "{device}")' for device in _DEVICES_RW))]
    rules.append("(allow file-read*\n" + "\n".join(f"  {rule}" for rule in read) + ")")
    if write:
        rules.append("(allow file-read* file-write*\n" + "\n".join(f"  {rule}" for rule in write) + ")")
    rules.append(_network(confinement, proxy_port))
    return Profile("\n".join(rules) + "\n", params)


def _network(confinement: Confinement, proxy_port: int | None) -> str:
    if confinement.network == "full":
        return ("(allow network*)\n(allow mach-lookup (global-name \"com.apple.SystemConfiguration.configd\")\n"
                "  (global-name \"com.apple.trustd.agent\"))")
    if confinement.network == "allowedHosts":
        if proxy_port is None or not 0 < int(proxy_port) < 65536:
            raise ValueError("sandbox.network allowedHosts needs the port of the sidecar's proxy")
        return ("; only the sidecar's filtering proxy\n"
                f'(allow network-outbound (remote ip "localhost:{int(proxy_port)}"))')
    return "; sandbox.network: none"


def _canonical(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"{path!r} is not an absolute path")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise ValueError(f"{path!r} holds a control character (a line break, a tab, NUL): rename it")
    return os.path.realpath(path)
