"""The arrows between sidecar's rooms point down the house that ARCHITECTURE.md draws.

Every import is read with ``ast``: module-level ones, those inside functions (deferred heavy
libraries) and those under ``if TYPE_CHECKING:``, since a type-only import is still an arrow a
reader has to follow. A room is a top-level module or package of ``sidecar/``; a module may import
its own room and any room in a layer below its own, never one beside it or above it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

SIDECAR = Path(__file__).resolve().parent.parent / "sidecar"

# Top first. Rooms in one layer are peers: neither may import the other.
HOUSE: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("transcripts",),  # plays protocol/examples through the client
    ("client",),  # spawns the sidecar, or runs its app in-process
    ("app",),  # runs the process: argv, stdio, lock, serve, teardown
    ("compose",),  # builds every service once and routes the handlers to them
    ("handlers",),
    ("rpc",),  # the engine: app, handlers and client use it; a service never sees JSON-RPC
    # The services, highest first.
    ("schedules",),
    ("chat",),
    ("toolsets",),
    ("tools",),
    ("mcp_host",),
    ("sandbox",),
    ("workspace",),
    ("store",),
    # What the services share, below all of them.
    ("children", "logs"),  # child processes (the sandbox starts its confined ones here); logging
    # frozen: which toolsets can change; embedding: a local sentence-embedding model (no domain)
    ("spawner", "secrets", "net", "frozen", "paging", "process", "embedding"),
    ("settings", "errors"),
    ("api", "cron", "ndjson", "__init__"),  # leaves: api imports only msgspec, the others nothing of sidecar
)

# Code that runs in another process, where sidecar is not importable: the toolset worker and the
# SDK that tool authors import (``covalt_toolset``).
SELF_CONTAINED = ("tools/providers/python/worker_process", "tools/providers/python/sdk")

# The engine is tested alone with in-memory streams: it knows no domain. NDJSON framing is the one
# thing it shares with the toolset worker's client and the spawner, so that sits below it, in a leaf.
RPC_MAY_IMPORT = ("rpc", "ndjson")

LAYER_OF = {room: i for i, layer in enumerate(HOUSE) for room in layer}


class Import(NamedTuple):
    path: Path
    line: int
    target: str  # a dotted module, as absolute


def _module(path: Path) -> list[str]:
    parts = list(path.relative_to(SIDECAR.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports(path: Path, source: bytes | None = None) -> Iterator[Import]:
    """Every import in ``path`` (or ``source``, as if it were there), relative ones made absolute."""
    here = _module(path)
    package = here if path.name == "__init__.py" else here[:-1]
    text = path.read_bytes() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            # ``from .. import secrets`` names a module; ``from .. import __version__`` a name in one.
            for alias in node.names:
                yield Import(path, node.lineno, f"{base}.{alias.name}")


def room_of(dotted: str) -> str | None:
    """The room of a module of sidecar (``__init__`` for the package itself); None outside sidecar."""
    parts = dotted.split(".")
    if parts[0] != "sidecar":
        return None
    if len(parts) == 1:
        return "__init__"
    top = parts[1]
    return top if (SIDECAR / top).is_dir() or (SIDECAR / f"{top}.py").is_file() else "__init__"


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(SIDECAR.parent)}:{imp.line}"


def _sources() -> list[Path]:
    return sorted(SIDECAR.rglob("*.py"))


def _self_contained(path: Path) -> str | None:
    rel = path.relative_to(SIDECAR).as_posix()
    return next((root for root in SELF_CONTAINED if rel.startswith(root + "/")), None)


def test_every_room_of_sidecar_has_its_place_in_the_house():
    rooms = {room_of(".".join(_module(p))) for p in _sources()}
    assert sorted(r for r in rooms if r not in LAYER_OF) == []


def test_no_import_runs_up_the_house():
    upward: dict[str, list[str]] = {}  # file:line and arrow -> what it imports
    for path in _sources():
        if _self_contained(path):
            continue
        mine = room_of(".".join(_module(path)))
        assert mine is not None
        for imp in imports(path):
            theirs = room_of(imp.target)
            if theirs is None or theirs == mine or LAYER_OF[theirs] > LAYER_OF[mine]:
                continue
            side = "beside" if LAYER_OF[theirs] == LAYER_OF[mine] else "above"
            upward.setdefault(f"{_where(imp)}: {mine} -> {theirs} ({side} it)", []).append(imp.target)
    found = [f"{arrow}: {', '.join(targets)}" for arrow, targets in upward.items()]
    assert found == [], "imports that run up the house:\n" + "\n".join(found)


def test_the_worker_process_and_the_toolset_sdk_import_nothing_of_sidecar():
    found: list[str] = []
    for path in _sources():
        root = _self_contained(path)
        if root is None:
            continue
        own = "sidecar." + root.replace("/", ".")
        found += [f"{_where(imp)}: {imp.target}" for imp in imports(path)
                  if room_of(imp.target) is not None and not imp.target.startswith(own + ".")]
    assert found == [], "the worker and the SDK run where sidecar is not importable:\n" + "\n".join(found)


def test_the_engine_imports_nothing_else_of_sidecar():
    found = [f"{_where(imp)}: {imp.target}" for path in sorted((SIDECAR / "rpc").rglob("*.py"))
             for imp in imports(path) if room_of(imp.target) not in (None, *RPC_MAY_IMPORT)]
    assert found == [], "rpc/ may use only itself and the framing leaf:\n" + "\n".join(found)


def test_the_reader_sees_imports_in_functions_and_under_type_checking():
    source = (b"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ...toolsets import service\n\n"
              b"def f():\n    from .. import slugs\n    import sidecar.chat.turns\n")
    found = sorted((i.line, i.target) for i in imports(SIDECAR / "tools" / "providers" / "probe.py", source))
    assert found == [(1, "typing.TYPE_CHECKING"), (3, "sidecar.toolsets.service"), (6, "sidecar.tools.slugs"),
                     (7, "sidecar.chat.turns")]
    assert [room_of(t) for _, t in found] == [None, "toolsets", "tools", "chat"]
    assert room_of("sidecar.__version__") == "__init__"
