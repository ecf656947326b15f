"""Logging to stderr through a queue: a handler never blocks the event loop on a slow pipe.

Every record passes `ScrubFilter` on the handlers (not on loggers, so third-party loggers' records
pass it too): a log line never holds a value known to be secret, nor a secret recognised by its shape (a URL's
credentials, a ``--token`` value, ``Authorization: Bearer ...``), at any level.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
import sys

# The HTTP clients under the SDKs, by their logger names (the SDKs pinned here ship httpx2/httpcore2).
HTTP_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2")


class ScrubFilter(logging.Filter):
    """Renders a record's message once, scrubbed, so no formatter downstream sees the raw args.

    Known values go first (they may sit inside a URL), then credentials by their shape.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        # Deferred: compiling the masking module's patterns costs about 8 ms, which the first
        # initialize answer need not wait for (records are filtered on the log listener's thread).
        from .secrets.masking import clean

        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not drop the record (or its secrets)
            message = f"{record.msg!r} {record.args!r}"
        record.msg = clean(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = clean(record.exc_text)
            # The traceback's frames may hold secrets in locals a custom formatter would print.
            record.exc_info = None
        if record.stack_info:
            record.stack_info = clean(record.stack_info)
        return True


def setup(level: str) -> logging.handlers.QueueListener:
    scrubber = ScrubFilter()
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(
        logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    )
    # On the handler the listener thread runs, not the QueueHandler: scrubbing (tens of µs a line)
    # stays off the event loop. The QueueHandler has already folded args and traceback into msg.
    stream.addFilter(scrubber)
    q: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = logging.handlers.QueueListener(q, stream)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(q)]
    # A log call with a bad format string would have logging print its raw args to stderr, unscrubbed.
    logging.raiseExceptions = False
    root.setLevel(level.upper())
    # aiosqlite's debug lines print every statement's parameters, stored API keys included.
    logging.getLogger("aiosqlite").setLevel(logging.INFO)
    # The HTTP clients log every request URL at INFO and headers at DEBUG: only warnings unless the
    # user asked for debug, and even then every line is scrubbed above.
    if level.lower() != "debug":
        for name in HTTP_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
    listener.start()
    return listener
