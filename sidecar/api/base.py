"""Building blocks of the wire contract: the Struct base and the method spec."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

# The id of anything named from outside (toolsets, tools, MCP servers, providers): 1-64 letters,
# digits, '.', '_' and '-', starting with a letter or digit, matched whole (ARCHITECTURE.md writes
# it ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$). Not written with '$': in Python '$' also matches before a
# final newline, and msgspec searches its patterns with Python's re, so "nl\n" passed. The
# lookahead ends at the true end of the string in Python and in JSON Schema's ECMA-262 alike.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?![\s\S])"
Id = Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]
_ID = re.compile(ID_PATTERN)


def is_id(value: str) -> bool:
    """Whether ``value`` is a valid id, whole (see ``ID_PATTERN``)."""
    return _ID.match(value) is not None


class Model(msgspec.Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """Base of every wire Struct: camelCase on the wire, unknown fields rejected."""


def wire_name(field: str) -> str:
    """A Model field's name on the wire (what ``rename="camel"`` makes of it), for messages."""
    head, *rest = field.split("_")
    return head + "".join(p.title() for p in rest)


Direction = Literal["clientToServer", "serverToClient", "both"]
Kind = Literal["request", "notification"]
CancelMode = Literal["interrupt", "signal"]


@dataclass(frozen=True, slots=True)
class MethodSpec:
    name: str
    direction: Direction
    kind: Kind
    summary: str
    params: Any | None = None  # a Model subclass, or None for "no params"
    result: Any | None = None  # a type msgspec can describe; None means the result is null
    errors: tuple[int, ...] = ()
    cancel: CancelMode = "interrupt"
    inline: bool = False  # answered in the reader, in receive order: only for methods that never wait
    # Endpoint names of the seed design documents this method serves (protocol/README.md maps them).
    seed_endpoints: tuple[str, ...] = ()


class Empty(Model):
    """An empty object: the result of methods that only acknowledge."""
