"""The worker process that runs one toolset's Python tools, one call at a time.

Started by ``sidecar/tools/providers/python/workers.py`` as ``python -I .../worker_process <config>``:
the folder's ``__main__`` runs, with nothing of the ``sidecar`` package importable, so the worker
starts on the standard library, msgspec and the tool SDK alone. Modules: ``main`` (start-up),
``zygote`` (the request loop), ``child`` (a call's process), ``tools`` (importing, describing and
calling tools), ``limits`` (rlimits, cgroup, the watch), ``procs`` (the process tree), ``pipes``,
``protocol`` and ``messages``. ``<config>`` is one JSON object (nothing secret: it shows up in ``ps``)::

    {"toolsetId": "app-builder", "toolsetDir": "/abs/toolset", "sdkDir": "/abs/sidecar/tools/providers/python/sdk",
     "memoryBytes": 1073741824, "fileBytes": 1073741824, "maxProcesses": 64,
     "outputBytes": 16777216, "idleSeconds": 300, "parentPid": 4242,
     "cgroup": {"version": 1, "dirs": {"pids": "/sys/fs/cgroup/pids/covalt/4242.1", "memory": "..."}}}

It speaks NDJSON JSON-RPC 2.0 on stdin/stdout. Methods:

- ``describe {tools: {toolId: entrypoint}}`` -> ``{toolId: {"ok": {name, description, inputSchema,
  requiresConfirmation, timeout, legacy}} | {"error": "tools/x.py: what is wrong"}}``
- ``call {tool, entrypoint, args, inputSchema, context: {workspace, chatId, toolCallId, settings,
  telemetry}, limits: {memoryBytes, maxProcesses, diskBytes}}`` -> ``{"result": value}``.
  The toolset id and folder in the tool's context come from the config. ``settings`` holds the
  tool's configuration, secret values included: it arrives on stdin with each call, never in the
  environment or on the command line, and the worker never writes it anywhere.
- ``shutdown`` -> ``{}``, then the worker exits.

A zygote: this process imports the toolset's modules (so calls start warm) but never runs a tool
function. Each call runs in a child forked from it ahead of time (the *spare*), so no call waits
for a fork: the next call's spare is forked as soon as a call is answered, while the host works
on the answer, and it rehearses a made-up call while it waits (the pages a call touches are
copied then, not during the call).
The child's only way back is its own result pipe; the protocol pipes are closed in it, and this
process is not dumpable, so the child cannot reopen them through ``/proc/<worker>/fd``. This
process is a child subreaper: whatever the tool starts, daemons that ``setsid`` and fork twice
included, stays its descendant, and when the call ends (answer, error, limit, cancel) every
descendant but the spare is stopped, killed and reaped before the answer goes out. A child that
closes its result pipe after a whole answer is killed then and reaped after the answer: it runs
nothing more, and the call does not wait for its memory to be torn down (about a millisecond).
What it may have left is read from its /proc entry, or where that is hidden (Landlock) from the
worker's cgroup, which holds every process of the calls; without either, its exit is waited for.
So nothing of a call outlives it, and a call that is killed costs only its child, not the warm
worker.

Per-call limits, in the child and what it starts: memory (RLIMIT_DATA, and the worker's cgroup when
the host made one), processes (the cgroup's ``pids.max``, else RLIMIT_NPROC), and disk: no file
larger than the quota (RLIMIT_FSIZE), and the workspace's file system may not grow by more than the
quota during the call (checked every ``POLL`` seconds; the files the call wrote past it are kept,
listed in the error: they may be rewrites of the user's own files).

A failed call is a JSON-RPC error whose ``data.kind`` says how it failed: ``arguments`` (-32602,
with ``path`` and ``reason``), ``raised`` (with ``type`` and ``traceback``), ``limit`` (with
``limit``: ``memory``, ``processes`` or ``disk``, and ``value``), ``crashed`` (the call's process
died), ``load``, ``output`` or ``cancelled`` (SIGINT from the host), all -32000.
A request the worker cannot read is -32700, -32601 or -32602 with ``data.kind`` ``protocol``.

The worker exits 0 at stdin EOF, after ``shutdown``, or after ``idleSeconds`` without a request,
after killing its descendants. Linux for the zygote's safety (prctl, /proc); other POSIX systems
get the same fork-per-call without the subreaper and the dumpable flag.
"""
