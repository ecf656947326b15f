"""Whether processes the tests started are still running."""

from __future__ import annotations

from pathlib import Path

import anyio


def gone(pid: int) -> bool:
    """A zombie counts as gone: it runs nothing and only waits for a parent (PID 1 here may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH while the process is being reaped
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def alive(pid: int) -> bool:
    return not gone(pid)


async def wait_gone(pid: int, timeout: float = 3) -> bool:
    with anyio.move_on_after(timeout):
        while not gone(pid):
            await anyio.sleep(0.02)
    return gone(pid)
