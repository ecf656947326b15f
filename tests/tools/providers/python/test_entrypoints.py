"""entrypoints.py: the one rule for what an entrypoint names (seed 000 §4.1)."""

from __future__ import annotations

from sidecar.tools.providers.python.entrypoints import importable, module_path


def test_an_entrypoint_names_a_module_under_tools_with_or_without_the_prefix() -> None:
    assert module_path("a.b:run") == module_path("tools.a.b:run") == "tools/a/b.py"
    assert module_path("hello") == "tools/hello.py"
    assert importable("a.b:run") == importable("tools.a.b:run") == "tools.a.b:run"
