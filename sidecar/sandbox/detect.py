"""Which mechanism confines tool processes here, found once by trying it.

Linux: bubblewrap first (``bwrap``: unprivileged through user namespaces on stock distributions,
and it gives every namespace: mount, pid, network, ipc, uts), then Landlock (filesystem, TCP and
signal rules from the kernel alone; no pid or mount isolation), else nothing but rlimits. A
``bwrap`` on PATH is not enough: a container or an AppArmor policy may forbid the namespaces it
needs, so the probe runs it once. macOS has Seatbelt (``sandbox-exec``); Windows nothing that confines
(mechanism "none"), only Job Objects for limits (windows.py), which the warning says plainly.

The probe costs one short process (about 10 ms): it runs on a thread, the first time anyone asks.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
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


_lock = threading.Lock()
_found: dict[Choice, Detected] = {}


def detect(choice: Choice = "auto") -> Detected:
    """The mechanism for ``choice`` ("auto": the best that works here); probed once per choice."""
    with _lock:
        found = _found.get(choice)
        if found is None:
            found = _found[choice] = _probe(choice)
            level = logging.INFO if found.warning is None else logging.WARNING
            log.log(level, "tool sandbox: %s%s", found.mechanism, f" ({found.warning})" if found.warning else "")
        return found


async def probe(choice: Choice = "auto") -> Detected:
    found = _found.get(choice)
    if found is not None:
        return found
    return await anyio.to_thread.run_sync(detect, choice)


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
    # Imported here, on the probe's thread: with bz2 and lzma, shutil and subprocess are about
    # 8 ms that the sidecar's start-up (which imports this module) would otherwise wait for.
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bwrap is not installed"
    true = shutil.which("true") or "/bin/true"
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
