"""The secret values this process knows, so any text can be scrubbed of them before it leaves.

Masking by meaning (a ``--token`` flag, a ``?sig=`` query) catches what looks secret; this registry
catches what *is* secret wherever it turns up: a server echoing its key in a usage line, an SDK's
exception quoting a header, a log record of a third-party library. Whoever reads a secret value (the
secret store, ``${VAR}`` resolution, a provider key, an MCP env or header literal) calls `remember`.

Log records arrive from threads (the queue listener, SDK worker threads), so the registry is guarded
by a lock; scrubbing reads an immutable snapshot, so it never waits on the lock.

`forget` is for a value that stops being secret; a value deleted from the store may still be a live
key elsewhere, so its owner may keep it remembered: masking a stale secret costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

MASK = "****"  # the same mask as `masking.MASK`; not imported, as masking imports variables, which imports us
MIN_LENGTH = 4  # shorter values would mask ordinary words (`scrub` ignores them too)

_lock = threading.Lock()
_values: set[str] = set()
_snapshot: tuple[str, ...] = ()


def _variants(value: str) -> set[str]:
    """The value as given and stripped: a key pasted with a trailing newline leaks in either form."""
    out = {value, value.strip()}
    return {v for v in out if len(v) >= MIN_LENGTH}


def _publish() -> None:
    global _snapshot
    _snapshot = tuple(sorted(_values, key=len, reverse=True))


def remember(value: str | None) -> None:
    """Register a secret value (idempotent; cheap when the value is already known)."""
    if not value:
        return
    variants = _variants(value)
    if variants <= _values:
        return
    with _lock:
        _values.update(variants)
        _publish()


def remember_all(values: Iterable[str]) -> None:
    for value in values:
        remember(value)


def forget(value: str | None) -> None:
    """Stop scrubbing `value` (as given and stripped)."""
    if not value:
        return
    with _lock:
        _values.difference_update(_variants(value))
        _publish()


def known() -> tuple[str, ...]:
    """The values registered now, longest first."""
    return _snapshot


def scrub_known(text: str) -> str:
    """`text` with every registered secret value masked."""
    values = _snapshot
    if not values or not text:
        return text
    for value in values:  # longest first: a value that contains another is replaced whole
        if value in text:
            text = text.replace(value, MASK)
    return text


def clear() -> None:
    """Forget everything (tests that run several sidecars in one process start clean)."""
    with _lock:
        _values.clear()
        _publish()
