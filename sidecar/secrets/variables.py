"""``${VAR}`` references: what a value refers to, and its resolution when the value is used (never
to store it).

Resolution reads a lookup its caller gives: the sidecar's is ``SecretStore.environ`` (the user's
secrets first, then the process environment), so nothing here reads ``os.environ`` by itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .known import remember
from .shapes import looks_like_credential, looks_secret_name

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_reference(value: str) -> bool:
    """The whole value is one ``${VAR}`` reference."""
    return _VAR.fullmatch(value) is not None


class MissingVariable(Exception):
    """A `${VAR}` reference names a variable that is not set."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return (f"{self.name} is not set: store it as a secret (secrets/set, in the app's secret settings) "
                f"or set it in the environment the app starts from")


def references(text: str) -> list[str]:
    """The variable names `text` refers to, in order."""
    return _VAR.findall(text)


def references_in(texts: Iterable[str | None]) -> set[str]:
    """Every variable name any of `texts` refers to."""
    return {name for text in texts if text and "${" in text for name in _VAR.findall(text)}


def resolve(text: str, variables: Mapping[str, str]) -> str:
    """Replace every `${VAR}` in `text` from `variables`.

    Raises:
        MissingVariable: a referenced variable is not set (an empty value counts as set).
    """
    if "${" not in text:
        return text

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        value = variables.get(name)
        if value is None:
            raise MissingVariable(name)
        if looks_secret_name(name) or looks_like_credential(value):
            # Scrubbed wherever it turns up later; a harmless value (LOG_LEVEL=debug) is not, or every
            # "debug" in the log would be masked.
            remember(value)
        return value

    return _VAR.sub(sub, text)


def resolve_mapping(values: Mapping[str, str], variables: Mapping[str, str]) -> dict[str, str]:
    return {k: resolve(v, variables) for k, v in values.items()}
