"""How a toolset's ``entrypoint`` names the function a worker imports: the one rule of seed 000 §4.1."""

from __future__ import annotations


def module_of(entrypoint: str) -> str:
    """The module an entrypoint names. Seed 000 §4.1: its path is relative to the toolset's
    ``tools/`` folder, so ``hello:run`` is ``tools/hello.py``; the seed's own examples write
    ``tools.hello:run``, which names the same module."""
    return "tools." + entrypoint.partition(":")[0].removeprefix("tools.")


def module_path(entrypoint: str) -> str:
    """``a.b:run`` (or ``tools.a.b:run``) -> ``tools/a/b.py``: the file of the module it names,
    relative to the toolset's folder (a package's is ``tools/a/b/__init__.py`` instead)."""
    return module_of(entrypoint).replace(".", "/") + ".py"


def importable(entrypoint: str) -> str:
    """``hello:run`` -> ``tools.hello:run``: what a worker (cwd: the toolset's folder) imports."""
    return f"{module_of(entrypoint)}:{entrypoint.partition(':')[2]}"
