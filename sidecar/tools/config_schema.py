"""A tool's ``config_schema`` (seed 004): the fields a toolset or a tool declares for the user to
fill in once, and the rules a declaration and a value follow. ``toolsets/manifest.py`` reads the
declarations from toolset.yaml; ``tools/config.py`` and ``tools/settings.py`` check values and
work out what a call gets."""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from ..errors import ManifestError

# A config field's name: what a tool reads as ``get_context().settings[name]`` and what the secret
# store's internal names end with, so it stays a plain lower-case identifier.
CONFIG_KEY_PATTERN = r"^[a-z_][a-z0-9_]{0,63}(?![\s\S])"
CONFIG_KEY_RULE = "1-64 characters: lower-case letters, digits and '_', not starting with a digit"
MAX_CONFIG_FIELDS = 64
ConfigType = Literal["string", "number", "integer", "boolean"]


class ConfigFieldDecl(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One field of a ``config_schema`` (seed 004): a value the user gives once, which the tool
    reads through ``get_context().settings``."""

    description: str = ""
    type: ConfigType = "string"
    secret: bool = False  # kept in the secret store, shown masked
    required: bool = False  # the tool is "available" (not ready) until it has a value
    default: str | int | float | bool | None = None


ConfigSchema = dict[str, ConfigFieldDecl]


_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "number": (int, float), "integer": (int,),
                                       "boolean": (bool,)}


def fits(type_: str, value: object) -> bool:
    """Whether ``value`` has the config type ``type_`` (a bool is no number here, as in JSON Schema)."""
    if isinstance(value, bool):
        return type_ == "boolean"
    return isinstance(value, _TYPES[type_])


def article(type_: str) -> str:
    return f"an {type_}" if type_ == "integer" else f"a {type_}"


def check_config_schema(where: str, schema: ConfigSchema) -> None:
    if len(schema) > MAX_CONFIG_FIELDS:
        raise ManifestError(where, f"{len(schema)} fields; the limit is {MAX_CONFIG_FIELDS}")
    for key, f in schema.items():
        if not re.match(CONFIG_KEY_PATTERN, key):
            raise ManifestError(f"{where}.{key}", f"not a valid field name: {CONFIG_KEY_RULE}")
        if f.secret and f.type != "string":
            raise ManifestError(f"{where}.{key}.type", "a secret field holds a string; drop type or secret")
        if f.secret and f.default is not None:
            raise ManifestError(f"{where}.{key}.default",
                                "a secret field has no default: the manifest is shared, its secret would not be")
        if f.default is not None and not fits(f.type, f.default):
            raise ManifestError(f"{where}.{key}.default", f"{f.default!r} is not {article(f.type)}")
