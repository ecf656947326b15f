"""Python toolset tools: a worker process per toolset (workers.py), the program it runs
(worker_main.py), the environment it gets (environment.py), and the SDK tool authors import (sdk/)."""
