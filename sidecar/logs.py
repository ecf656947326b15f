"""Logging to stderr through a queue: a handler never blocks the event loop on a slow pipe."""

from __future__ import annotations

import logging
import logging.handlers
import queue
import sys


def setup(level: str) -> logging.handlers.QueueListener:
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(
        logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    )
    q: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = logging.handlers.QueueListener(q, stream)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(q)]
    root.setLevel(level.upper())
    # aiosqlite's debug lines print every statement's parameters, stored API keys included.
    logging.getLogger("aiosqlite").setLevel(logging.INFO)
    listener.start()
    return listener
