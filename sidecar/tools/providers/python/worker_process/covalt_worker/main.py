"""The worker's start: read the config, claim the protocol pipes, set the worker's own limits and
flags, import the SDK, serve."""

from __future__ import annotations

import faulthandler
import importlib
import os
import sys

import msgspec

from .limits import apply_limits
from .procs import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, claim_stdio, die_with_parent, exit_worker, prctl
from .protocol import Config
from .zygote import Worker


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} <config JSON>")
    config = msgspec.json.decode(argv[1], type=Config)
    die_with_parent(config.parent_pid)
    config.toolset_dir = os.path.abspath(config.toolset_dir)
    wire_in, wire_out = claim_stdio()
    faulthandler.enable(sys.stderr)  # a segfault in native code leaves a traceback in stderr
    apply_limits(config)
    # The calls' children cannot open this process's pipes through /proc/<pid>/fd, and every
    # process they start, daemons included, is re-parented to this one when its parent exits.
    prctl(PR_SET_DUMPABLE, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # The toolset folder is managed content: no __pycache__ may appear in it.
    sys.dont_write_bytecode = True
    sys.path[:0] = [config.sdk_dir, config.toolset_dir]
    sdk = importlib.import_module("covalt_toolset")
    os.chdir(config.toolset_dir)
    Worker(config, wire_in, wire_out, sdk).serve()
    exit_worker(0)
