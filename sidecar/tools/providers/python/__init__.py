"""Python toolset tools: the pools of worker processes and the environment they get (workers.py), one
worker process over its pipe (worker.py), the program it runs (worker_process/), how an entrypoint names
a function and its module (entrypoints.py), and the SDK tool authors import (sdk/)."""
