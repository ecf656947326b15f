"""A tool's effective sandbox limits: the one place its layers are folded (seed 004's defaults, the
manifest's for the toolset and for the tool, the user's for the toolset and for the tool), with
where each value came from; and the user's changes to a layer, checked.

Python tools and ``run_command`` run as processes of their own and get a ``Confinement``; the other
tools (built-in file tools, HTTP and MCP tools) have none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from ..api.base import wire_name
from ..api.limits import ConstraintsSettings, LimitLayer, SandboxSettings, ToolLimits, ToolsetLimits
from ..api.tools import Tool
from ..errors import InvalidParams
from ..sandbox import settings as sandbox_settings
from ..sandbox.hints import warnings_of
from ..sandbox.policy import Confinement, Patch, resolve
from ..store.tool_catalog import CatalogRow
from .providers.python.workers import DEFAULT_LIMITS

Source = Literal["default", "manifest", "user"]
Layers = list[tuple[Source, "Patch | None"]]

CONFINED_BUILTINS = frozenset({"run_command"})
# run_command keeps the sidecar's tool timeout (the model may ask for up to its maximum per call).
_BUILTIN = Patch(timeout_seconds=DEFAULT_LIMITS.default_timeout)
_CONSTRAINT_FIELDS = ("timeout_seconds",)
# SandboxSettings' fields -> Patch's.
_SANDBOX_FIELDS = {"memory": "memory_bytes", "network": "network", "allowed_hosts": "allowed_hosts",
                   "writable": "writable", "processes": "max_processes", "disk": "disk_bytes"}


def layers_of(row: CatalogRow) -> Layers | None:
    """The row's layers, lowest first (None: the tool runs in no process of its own)."""
    if row.provider == "python":
        stored = sandbox_settings.from_stored
        return [("manifest", stored(row.toolset_limits)), ("manifest", stored(row.config.get("limits"))),
                ("user", stored(row.user_toolset_limits)), ("user", stored(row.user_limits))]
    if row.provider == "builtin" and row.tool_id in CONFINED_BUILTINS:
        return [("default", _BUILTIN)]
    return None


def fold(layers: Layers) -> tuple[Confinement, dict[str, Source]]:
    """The effective confinement, and the source of each of its fields."""
    sources: dict[str, Source] = dict.fromkeys(Confinement.__struct_fields__, "default")
    for source, patch in layers:
        for name, value in msgspec.structs.asdict(patch).items() if patch is not None else ():
            if value is not None:
                sources[name] = source
    return resolve(*(patch for _, patch in layers)), sources


def confinement_of(row: CatalogRow) -> Confinement | None:
    layers = layers_of(row)
    return fold(layers)[0] if layers is not None else None


def view(layers: Layers, tool_id: str | None = None, mechanism: str | None = None) -> ToolLimits:
    """``mechanism``: what confines tools here (detect.Mechanism), for what it cannot enforce as set."""
    c, sources = fold(layers)
    return ToolLimits(
        timeout_seconds=c.timeout_seconds, memory_bytes=c.memory_bytes, max_processes=c.max_processes,
        disk_bytes=c.disk_bytes, network=c.network, allowed_hosts=list(c.allowed_hosts), writable=list(c.writable),
        sources={wire_name(k): v for k, v in sources.items()}, warnings=warnings_of(c, tool_id, mechanism))


def view_of(row: CatalogRow, mechanism: str | None = None) -> ToolLimits | None:
    layers = layers_of(row)
    return view(layers, row.tool_id, mechanism) if layers is not None else None


def layer_view(patch: Patch | None) -> LimitLayer | None:
    """A stored layer as the wire shows it (sizes in bytes)."""
    if patch is None:
        return None
    constraints = ConstraintsSettings(timeout_seconds=patch.timeout_seconds) \
        if patch.timeout_seconds is not None else None
    given: dict[str, Any] = {wire_name(k): list(v) if isinstance(v, tuple) else v for k, f in _SANDBOX_FIELDS.items()
                             if (v := getattr(patch, f)) is not None}
    return LimitLayer(constraints=constraints, sandbox=msgspec.convert(given, SandboxSettings) if given else None)


def changed(old: Patch | None, constraints: Any, sandbox: Any, data_dir: Path | None) -> Patch:
    """``old`` (the user's layer) with a request's ``constraints`` and ``sandbox`` applied: UNSET
    keeps, None clears (a whole block or one key), a value is checked as toolset.yaml's would be
    (InvalidParams naming ``params.sandbox.memory`` and the forms it takes)."""
    changes: dict[str, Any] = {}
    if constraints is None:
        changes.update(dict.fromkeys(_CONSTRAINT_FIELDS))
    if sandbox is None:
        changes.update(dict.fromkeys(_SANDBOX_FIELDS.values()))
    given_c = _given(constraints) if isinstance(constraints, ConstraintsSettings) else {}
    given_s = _given(sandbox) if isinstance(sandbox, SandboxSettings) else {}
    changes.update({f: None for f, v in given_c.items() if v is None})
    changes.update({_SANDBOX_FIELDS[f]: None for f, v in given_s.items() if v is None})
    written_c = {k: v for k, v in given_c.items() if v is not None}
    written_s = {("allowedHosts" if k == "allowed_hosts" else k): v for k, v in given_s.items() if v is not None}
    try:
        patch, _ = sandbox_settings.layer(written_c or None, written_s or None, data_dir=data_dir)
    except sandbox_settings.SettingError as exc:
        block, _, rest = exc.where.partition(".")
        key = rest.split("[")[0]
        raise InvalidParams(f"params.{block}." + rest.replace(key, wire_name(key), 1), exc.reason) from None
    changes.update({k: v for k, v in msgspec.structs.asdict(patch).items() if v is not None})
    return sandbox_settings.merge(old, changes)


def _given(settings: msgspec.Struct) -> dict[str, Any]:
    return {f: v for f in settings.__struct_fields__ if (v := getattr(settings, f)) is not msgspec.UNSET}


def toolset_view(toolset_id: str, manifest: Patch | None, user: Patch | None, tools: list[Tool]) -> ToolsetLimits:
    """toolsets/getLimits: the toolset's two layers, and what its tools may do beyond the defaults now."""
    return ToolsetLimits(toolset_id=toolset_id, manifest=layer_view(manifest), user=layer_view(user),
                         warnings=[w for t in tools if t.limits is not None for w in t.limits.warnings])
