"""The environment tool code runs with: an allow-list, so the sidecar's own secrets (provider API
keys, tokens the desktop app passed in) never reach a tool, a worker or a shell command."""

from __future__ import annotations

import os

_KEEP = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                   "TERM", "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP"})


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEEP or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    env["PYTHONIOENCODING"] = "utf-8"
    if extra:
        env.update(extra)
    return env
