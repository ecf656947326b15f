"""The bubblewrap command line that confines one tool process.

The sandbox starts from an empty root: the system's programs and libraries, the Python the worker
runs on, the sidecar's worker script and SDK, and the toolset's folder are bound read-only; the
chat's workspace (and ``Confinement.writable``) read-write; /tmp is a fresh tmpfs that also holds
HOME. The data directory, other chats' workspaces and the user's home are simply not there. A
data directory under /tmp gets a read-only tmpfs of its own inside the sandbox's /tmp (see
``_under_tmp``), so a write beside the workspace fails there as it does anywhere else. Every
namespace is new (``--unshare-all``), so the tool sees its own process list (the sidecar's pid does
not exist for it: no signal, no /proc/<pid>/environ) and, unless ``network`` is "full", a network
with nothing but its own loopback. ``--die-with-parent`` takes the whole sandbox down with the
bwrap process the sidecar started; ``--new-session`` keeps it off any terminal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from .policy import Network

TMP = "/tmp"
SANDBOX_HOME = "/tmp/home"

# What programs need from /etc: the loader's cache, users and groups by name, time zone, TLS roots,
# alternatives (where /usr/bin/python3 and friends point on Debian), MIME types. Never shadow or sudoers.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
       "localtime", "timezone", "ssl", "ca-certificates", "ca-certificates.conf", "pki", "mime.types",
       "os-release", "protocols", "services", "login.defs", "profile", "bash.bashrc", "inputrc", "locale.alias",
       "gai.conf", "host.conf", "fonts")
NETWORK_ETC = ("resolv.conf", "hosts")  # only where the tool may use the network
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class Binds(msgspec.Struct, frozen=True, kw_only=True):
    """The paths one sandbox sees, each at its own path."""

    read_only: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()


def command(bwrap: str, argv: Sequence[str], *, binds: Binds, network: Network, cwd: str,
            info_fd: int | None = None, root: str = "/", extra: Sequence[str] = ()) -> list[str]:
    """``bwrap ... -- argv``. ``root`` is where the system paths are looked up (tests); ``extra``
    goes after the filesystem (the allowedHosts proxy's socket and bridge, sidecar/sandbox/egress.py)."""
    out = [bwrap, "--unshare-all"]
    if network == "full":
        out.append("--share-net")
    out += ["--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
    out += _system(root, network)
    mounts = _outermost(binds)
    tops = _under_tmp(mounts)
    for top in tops:
        out += ["--tmpfs", top]
    for path, writable in mounts:
        out += ["--bind" if writable else "--ro-bind", path, path]
    # The root bwrap builds is a tmpfs: read-only, a write beside the workspace (../../sidecar.db)
    # fails with EROFS instead of landing in a folder that vanishes with the sandbox. The same for
    # the folders on the way to a bind inside the sandbox's own /tmp, once the binds are in them.
    out += [*extra, "--remount-ro", "/"]
    for top in tops:
        out += ["--remount-ro", top]
    out += ["--chdir", cwd]
    if info_fd is not None:
        out += ["--info-fd", str(info_fd)]
    return [*out, "--", *argv]


def _system(root: str, network: Network) -> list[str]:
    out: list[str] = []
    for path in SYSTEM:
        host = os.path.join(root, path.lstrip("/"))
        if os.path.islink(host):
            # /lib -> usr/lib on merged-/usr systems: the same link, not a second mount
            out += ["--symlink", os.readlink(host), path]
        elif os.path.isdir(host):
            out += ["--ro-bind", host, path]
    names = ETC + (NETWORK_ETC if network != "none" else ())
    for name in names:
        host = os.path.join(root, "etc", name)
        if os.path.exists(host):
            out += ["--ro-bind", host, f"/etc/{name}"]
    return out


def _under_tmp(mounts: list[tuple[str, bool]]) -> list[str]:
    """The outermost folders that exist in the sandbox's /tmp only as the way to a bind: with the
    data directory at /tmp/x/data, the workspace /tmp/x/data/chats/c1/workspace would otherwise be
    reached through folders bwrap makes in the writable /tmp, where ../../sidecar.db lands and
    silently vanishes with the sandbox. Each gets a tmpfs that is made read-only after the binds.
    A tmpfs shows nothing of the real folder (binding the real /tmp/x read-only would show the
    database and every other chat). The tool's HOME (/tmp/home) stays writable."""
    bound = {path for path, _ in mounts}
    tops: list[str] = []
    for path, _ in mounts:
        if not path.startswith(TMP + os.sep):
            continue
        ancestor = TMP
        for part in path[len(TMP) + 1:].split(os.sep)[:-1]:
            ancestor = os.path.join(ancestor, part)
            if ancestor in bound:
                break  # the real folder from here down
            if ancestor == SANDBOX_HOME or SANDBOX_HOME.startswith(ancestor + os.sep):
                continue  # the tool's own home: writable, the read-only part starts below it
            if ancestor not in tops:
                tops.append(ancestor)
            break
    return tops


def _outermost(binds: Binds) -> list[tuple[str, bool]]:
    """Absolute, without repeats (writable wins), a folder before what lies inside it: a writable
    workspace bound inside a read-only folder stays writable, and the other way round."""
    seen: dict[str, bool] = {}
    for path in binds.read_only:
        seen.setdefault(os.path.abspath(path), False)
    for path in binds.writable:
        seen[os.path.abspath(path)] = True
    return sorted(seen.items(), key=lambda item: (item[0].count(os.sep), item[0]))
