"""How a failure reads: exception text, tracebacks, sizes and signal names, each bounded."""

from __future__ import annotations

import os
import signal
import traceback

_MAX_MESSAGE = 4_000  # characters of an exception message sent back
_MAX_TRACEBACK = 32_000  # characters, the end kept: the innermost frames matter most
# The worker's own folder (this package and the __main__ that starts it): its frames are never
# the tool's, so a traceback leaves them out.
_WORKER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def describe_exc(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = ""
    text = text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def format_traceback(exc: BaseException, toolset_dir: str) -> str:
    """The frames in the toolset's own files if there are any, else all but the worker's."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not inside(f.filename, _WORKER)]
    own = [f for f in frames if inside(f.filename, toolset_dir)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(own or frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    text = "".join(lines)
    return text if len(text) <= _MAX_TRACEBACK else "…" + text[-_MAX_TRACEBACK:]


def inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def signal_name(number: int) -> str:
    """``SIGSEGV (Segmentation fault)``: the name, and what it means to someone who does not know it."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
    meaning = signal.strsignal(number)
    return f"{name} ({meaning})" if meaning else name
