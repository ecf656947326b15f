"""Which mechanism confines tool processes here, found once by trying it.

Linux: bubblewrap first (``bwrap``: unprivileged through user namespaces on stock distributions,
and it gives every namespace: mount, pid, network, ipc, uts), then Landlock (filesystem, TCP and
signal rules from the kernel alone; no pid or mount isolation), else nothing but rlimits. A
``bwrap`` on PATH is not enough: a container or an AppArmor policy may forbid the namespaces it
needs, so the probe runs it once. macOS has Seatbelt (``sandbox-exec``); Windows nothing that confines
(mechanism "none"), only Job Objects for limits (windows.py), which the warning says plainly.

The probe costs one short process (about 20 ms): it runs on a thread. ``initialize`` reports the
mechanism, and the first answer must not wait for that process, so what the probe found is
recorded in the data directory (``sandbox-probe.json``) beside everything that decides it (the
bwrap program's path and stat, the kernel, the uid, the user-namespace sysctls, the LSMs, the
seccomp state, the ``--sandbox`` choice): a start whose fingerprint matches answers from the record
and probes right after the answer, and a probe that finds something else rewrites the record and
is announced (``sandbox/changed``). Only ``initialize`` ever uses a recalled answer: a tool process
starts on the probe's own finding, never on a record.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import Literal

import anyio.to_thread
import msgspec

log = logging.getLogger("sidecar.sandbox")

Mechanism = Literal["bubblewrap", "landlock", "seatbelt", "none"]
Choice = Literal["auto", "bubblewrap", "landlock", "none"]
CHOICES: tuple[Choice, ...] = ("auto", "bubblewrap", "landlock", "none")

# The Landlock syscalls have the same numbers on every architecture (added after the tables merged).
SYS_LANDLOCK_CREATE_RULESET = 444
LANDLOCK_CREATE_RULESET_VERSION = 1


class Detected(msgspec.Struct, frozen=True, kw_only=True):
    mechanism: Mechanism
    bwrap: str | None = None  # the bwrap program, with bubblewrap
    landlock_abi: int = 0  # the kernel's Landlock ABI version, 0 without
    warning: str | None = None  # what is not confined, worded for the user

    @property
    def confined(self) -> bool:
        return self.mechanism != "none"


RECORD_FILE = "sandbox-probe.json"
# Part of the fingerprint: a build whose probe decides differently must not trust an older record.
_RECORD_FORMAT = "1"
# What can forbid the namespaces bwrap needs (Debian's switch, the per-user limits, Ubuntu's AppArmor
# restriction) and which security modules are active (Landlock among them).
_KNOBS = ("/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
          "/proc/sys/kernel/apparmor_restrict_unprivileged_unconfined",
          *(f"/proc/sys/user/max_{ns}_namespaces" for ns in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")),
          "/sys/kernel/security/lsm")


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """What a probe found, and the fingerprint of the machine it found it on."""

    key: dict[str, str]
    found: Detected


_lock = threading.Lock()
_found: dict[Choice, Detected] = {}
_recorded: set[tuple[Choice, Path]] = set()


def detect(choice: Choice = "auto", record: Path | None = None) -> Detected:
    """The mechanism for ``choice`` ("auto": the best that works here); probed once per choice.
    ``record``: the file that remembers the finding for the next start (rewritten only when it differs)."""
    with _lock:
        found = _found.get(choice)
        if found is None:
            key = fingerprint(choice)  # taken before the probe: a change during it is caught next time
            found = _found[choice] = _probe(choice)
            level = logging.INFO if found.warning is None else logging.WARNING
            log.log(level, "tool sandbox: %s%s", found.mechanism, f" ({found.warning})" if found.warning else "")
        else:
            key = None
        if record is not None and (choice, record) not in _recorded:
            _recorded.add((choice, record))
            _write_record(record, Record(key=key or fingerprint(choice), found=found))
        return found


async def probe(choice: Choice = "auto", record: Path | None = None) -> Detected:
    found = _found.get(choice)
    if found is not None and (record is None or (choice, record) in _recorded):
        return found
    return await anyio.to_thread.run_sync(detect, choice, record)


def probed(choice: Choice = "auto") -> Detected | None:
    """The probe's finding, if it has finished (never a record's)."""
    return _found.get(choice)


def recall(choice: Choice, record: Path) -> Detected | None:
    """What the last probe on this machine found, if nothing that decides it has changed since: for
    ``initialize`` only, which must not wait for the probe. None without a matching record."""
    try:
        with open(record, "rb") as f:
            recorded = msgspec.json.decode(f.read(), type=Record)
    except (OSError, msgspec.DecodeError):
        return None
    return recorded.found if recorded.key == fingerprint(choice) else None


def fingerprint(choice: Choice) -> dict[str, str]:
    """Everything that can change what the probe finds, read without a process or a heavy import
    (about 0.2 ms). What it misses (an AppArmor profile loaded without touching /etc/apparmor.d, a
    container's seccomp filter that leaves the status line alone) the probe after the answer catches."""
    key = {"format": _RECORD_FORMAT, "choice": choice, "platform": sys.platform,
           "uid": str(os.getuid()) if hasattr(os, "getuid") else ""}
    if hasattr(os, "uname"):
        uname = os.uname()
        key["kernel"] = f"{uname.release} {uname.version} {uname.machine}"
    bwrap = which("bwrap")
    key["bwrap"] = f"{bwrap} {_stat(bwrap)}" if bwrap else "-"
    key["sandbox-exec"] = _stat("/usr/bin/sandbox-exec")
    key["apparmor.d"] = _stat("/etc/apparmor.d")
    try:  # which user namespace (a container has its own); /proc's times change with every process
        key["userns"] = str(os.stat("/proc/self/ns/user").st_ino)
    except OSError:
        key["userns"] = "-"
    for knob in _KNOBS:
        key[knob] = _read(knob)
    status = _read("/proc/self/status")
    key["status"] = " ".join(line.replace("\t", "") for line in status.splitlines()
                             if line.startswith(("Seccomp:", "NoNewPrivs:")))
    return key


def which(name: str) -> str | None:
    """``shutil.which`` without importing shutil (with bz2 and lzma, a few ms of start-up)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _stat(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_dev}:{st.st_ino} {st.st_mode:o} {st.st_uid} {st.st_size} {st.st_mtime_ns}"


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return "-"


def _write_record(path: Path, record: Record) -> None:
    data = msgspec.json.encode(record)
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except OSError:
        pass
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # process.CRASH_LEFTOVERS sweeps it
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # a first start probes before the lock makes it
        with open(scratch, "wb") as f:
            f.write(data)
        os.replace(scratch, path)  # a reader sees the old record or the new one, never half
    except OSError as exc:  # a read-only or missing data directory: the next start probes again
        log.debug("could not record the sandbox probe in %s: %s", path, exc)
        try:
            os.unlink(scratch)
        except OSError:
            pass


def _probe(choice: Choice, platform: str = sys.platform) -> Detected:
    if choice == "none":
        limits = "Job Object limits only" if platform == "win32" else "rlimits only"
        return Detected(mechanism="none", warning="the sandbox is turned off (--sandbox none): tools run "
                        f"unconfined, with {limits}; they can read and write anything this user can")
    if platform == "darwin" and choice == "auto" and _has_sandbox_exec():
        # The profile (sidecar/sandbox/seatbelt.py) is unit-tested as text only: untested on a Mac here.
        return Detected(mechanism="seatbelt")
    if platform == "win32":
        from .windows import warning  # noqa: PLC0415 - Windows only: its wording, no ctypes

        return Detected(mechanism="none", warning=warning())
    if platform != "linux":
        return Detected(mechanism="none", warning=f"no sandbox on {platform}: tools run with rlimits only")
    bwrap_problem = None
    if choice in ("auto", "bubblewrap"):
        bwrap, bwrap_problem = _try_bwrap()
        if bwrap is not None:
            return Detected(mechanism="bubblewrap", bwrap=bwrap, landlock_abi=landlock_abi())
    abi = landlock_abi()
    if choice in ("auto", "landlock") and abi > 0:
        return Detected(mechanism="landlock", landlock_abi=abi,
                        warning=None if choice == "landlock" else
                        f"bubblewrap is not usable ({bwrap_problem}): Landlock confines files, TCP and signals, "
                        "but tools share the sidecar's process list and /proc")
    why = bwrap_problem or "bubblewrap was not chosen"
    return Detected(mechanism="none", landlock_abi=abi,
                    warning=f"NO SANDBOX: {why}, and the kernel has no Landlock; tools run unconfined with rlimits "
                            "only (install the bubblewrap package)")


def _has_sandbox_exec() -> bool:
    from .seatbelt import SANDBOX_EXEC  # noqa: PLC0415 - macOS only: Linux start-up never needs the profile

    return os.path.exists(SANDBOX_EXEC)


def _try_bwrap() -> tuple[str | None, str | None]:
    # Imported here, on the probe's thread: subprocess costs a few ms that the sidecar's start-up
    # (which imports this module) would otherwise wait for.
    import subprocess  # noqa: PLC0415

    bwrap = which("bwrap")
    if bwrap is None:
        return None, "bwrap is not installed"
    true = which("true") or "/bin/true"
    try:
        done = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--", true],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap cannot run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"bwrap cannot create namespaces here: {said[-1] if said else f'exit {done.returncode}'}"
    return bwrap, None


def landlock_abi() -> int:
    if sys.platform != "linux":
        return 0
    import ctypes  # a few ms of import, paid only by the probe

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(abi), 0)
