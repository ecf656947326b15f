"""Building blocks of the wire contract: the Struct base and the method spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec


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
