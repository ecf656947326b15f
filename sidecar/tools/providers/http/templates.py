"""``${name}`` templates of an HTTP tool, and encoding each value for the place it lands.

The URL template is cut into its parts (host, path segments, query pairs) BEFORE anything is put
in, at the ``/``, ``?``, ``&``, ``=`` and ``#`` the author wrote; each value is then
percent-encoded for its part, so an argument holding ``../``, ``?``, ``#``, ``%2F`` or ``@`` stays
inside its own path segment or query value. A header value refuses line breaks and other control
characters (no header can be added); the host part takes no argument at all (``spec.py`` refuses
that) and a config or secret value there must be a plain host name. A JSON body is built as data
and encoded once, so a value can never close a string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import msgspec

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\}")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_HOST_VALUE = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$")


class TemplateError(ValueError):
    """A template that cannot be read (a ``${`` without its ``}``, a bad name)."""


class RenderError(Exception):
    """A value that cannot go where the template puts it; the message names the placeholder, never
    the value (it may be a secret)."""


class Absent:
    """An optional argument the call did not give."""


ABSENT = Absent()


class Template:
    """A string as literal parts and placeholder names, alternating (literal first)."""

    __slots__ = ("names", "parts", "whole")

    def __init__(self, text: str) -> None:
        pieces = PLACEHOLDER.split(text)
        self.parts: list[str] = pieces[0::2]
        self.names: list[str] = pieces[1::2]
        for literal in self.parts:
            if "${" in literal:
                raise TemplateError(f"{literal[literal.index('${'):][:40]!r}: a placeholder is ${{name}}, the name "
                                    "made of letters, digits and '_' (and '.' to read into an earlier step's result)")
        # The whole text is one placeholder: the value keeps its JSON type in a body, and an
        # absent optional argument drops the query parameter or header instead of sending "".
        self.whole = len(self.names) == 1 and self.parts == ["", ""]

    def render(self, values: Values, encode: Callable[[str, str], str]) -> str:
        """The text with each value passed through ``encode(value_text, name)``."""
        if not self.names:
            return self.parts[0]
        out = [self.parts[0]]
        for name, literal in zip(self.names, self.parts[1:], strict=True):
            out.append(encode(text_of(values.get(name), name), name))
            out.append(literal)
        return "".join(out)


def text_of(value: Any, name: str) -> str:
    if isinstance(value, Absent) or value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return msgspec.json.encode(value).decode()
    return msgspec.json.encode(value).decode()  # an object or array: its JSON text


@dataclass
class Values:
    """What the placeholders of one call stand for."""

    args: Mapping[str, Any]
    arg_names: frozenset[str]  # declared by the input schema: these are arguments, given or not
    named: Mapping[str, Any]  # config values and secrets (store first, then environment), by name
    steps: dict[str, Any] = field(default_factory=dict)  # earlier steps' results, by step id

    def get(self, name: str) -> Any:
        root, dot, rest = name.partition(".")
        if dot:
            return _dig(self.steps[root], rest.split("."), name)
        if root in self.steps:
            return self.steps[root]
        if root in self.arg_names:
            return self.args.get(root, ABSENT)
        value = self.named.get(root)
        if value is None:
            raise MissingValue(root)
        return value


class MissingValue(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        lower = self.name.lower() == self.name
        how = (f"give it a value with config/set, or store a secret {self.name}" if lower else
               "store it as a secret (secrets/set, in the app's secret settings) or set it in the environment "
               "the app starts from")
        return f"${{{self.name}}} is not an argument of this tool and {self.name} is not set: {how}"


def _dig(value: Any, keys: list[str], name: str) -> Any:
    for key in keys:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise RenderError(f"${{{name}}}: the earlier step's result has no {key!r} there")
    return value


# -- encoders: (value text, placeholder name) -> what goes on the wire --------------------------------


def path_segment(value: str, name: str) -> str:
    # safe="": '/', '?', '#', '%', '@', ':' are all encoded, so the value stays one segment.
    return quote(value, safe="")


def query_part(value: str, name: str) -> str:
    return quote(value, safe="")


def header_value(value: str, name: str) -> str:
    if _CONTROL.search(value):
        raise RenderError(f"${{{name}}} holds a line break or another control character, which a header "
                          "value cannot hold")
    return value


def host_part(value: str, name: str) -> str:
    if not _HOST_VALUE.match(value):
        raise RenderError(f"${{{name}}} goes into the host part of the URL and is not a plain host name")
    return value


def form_part(value: str, name: str) -> str:
    return quote(value, safe="")


def plain(value: str, name: str) -> str:
    return value


# -- the URL -----------------------------------------------------------------------------------------


class UrlTemplate:
    """A URL template cut into its parts at the separators its author wrote."""

    __slots__ = ("authority", "query", "scheme", "segments")

    def __init__(self, text: str) -> None:
        scheme, _, rest = text.partition("://")
        self.scheme = scheme.lower()
        rest = rest.partition("#")[0]  # a fragment never goes to the server
        cut = re.search(r"[/?]", rest)
        authority, tail = (rest[: cut.start()], rest[cut.start():]) if cut else (rest, "")
        path, _, query = tail.partition("?")
        self.authority = Template(authority)
        self.segments = [Template(s) for s in path.split("/")[1:]] if path else []
        self.query: list[tuple[Template, Template | None]] = []
        for pair in query.split("&") if query else []:
            key, eq, value = pair.partition("=")
            self.query.append((Template(key), Template(value) if eq else None))

    def render(self, values: Values, extra: list[tuple[Template, Template]]) -> tuple[str, str]:
        """(the URL to request, its host as written: ``name`` or ``name:port``)."""
        authority = self.authority.render(values, host_part)
        path = "".join("/" + _segment(t, values) for t in self.segments)
        pairs = []
        for key, value in [*self.query, *extra]:
            if value is not None and value.whole and isinstance(values.get(value.names[0]), Absent):
                continue  # an optional argument not given: no parameter at all
            k = key.render(values, query_part)
            pairs.append(k if value is None else f"{k}={value.render(values, query_part)}")
        url = f"{self.scheme}://{authority}{path or '/'}" + (f"?{'&'.join(pairs)}" if pairs else "")
        return url, authority.lower()


def _segment(template: Template, values: Values) -> str:
    for name in template.names:
        if isinstance(values.get(name), Absent):
            raise RenderError(f"${{{name}}} is part of the URL's path: give the argument {name}")
    out = template.render(values, path_segment)
    if template.names and out.strip(".") == "":
        # A segment that is "." or ".." (only dots, from a value) would be read as "this folder" or
        # "the parent": encoded, it is a name like any other.
        out = out.replace(".", "%2E")
    return out


# -- bodies ------------------------------------------------------------------------------------------


def json_body(template: Any, values: Values) -> Any:
    """The JSON body as data: every string is a template; one that is a single placeholder takes
    the value itself (a number stays a number); an absent optional argument drops its key."""
    if isinstance(template, str):
        t = Template(template)
        if t.whole:
            return values.get(t.names[0])
        return t.render(values, plain)
    if isinstance(template, dict):
        out = {}
        for key, item in template.items():
            value = json_body(item, values)
            if not isinstance(value, Absent):
                out[key] = value
        return out
    if isinstance(template, list):
        return [v for v in (json_body(item, values) for item in template) if not isinstance(v, Absent)]
    return template


def form_body(template: Mapping[str, str], values: Values) -> str:
    pairs = []
    for key, text in template.items():
        t = Template(text)
        if t.whole and isinstance(values.get(t.names[0]), Absent):
            continue
        pairs.append(f"{quote(key, safe='')}={t.render(values, form_part)}")
    return "&".join(pairs)


def headers(template: Mapping[str, str], values: Values) -> list[tuple[str, str]]:
    out = []
    for key, text in template.items():
        t = Template(text)
        if t.whole and isinstance(values.get(t.names[0]), Absent):
            continue
        out.append((key, t.render(values, header_value)))
    return out
