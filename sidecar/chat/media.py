"""What of a tool result's media (MCP image and audio content) a model is given: the blocks of one
kind whose format a model takes, within a size and a count; the rest named in the text with why.
``images`` and ``audio`` each describe their kind once; the rules are here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_BYTES = 5 * 1024 * 1024
"""The largest picture or clip given to a model (Anthropic's limit per image; OpenAI's is higher)."""


@dataclass(frozen=True)
class Kind:
    block: str  # the MCP content type: "image", "audio"
    formats: Mapping[str, str]  # MIME type (lower case) -> the format named on the wire
    takes: str  # what a model takes, as the refusal says it
    size_words: str  # how the size refusal ends: "a model takes", "a model is given"
    most: int  # the most blocks of one result given to a model

    @property
    def too_many(self) -> str:
        return f"not given to the model (it is given the first {self.most} of a result)"

    def refused(self, block: dict[str, Any]) -> str | None:
        """Why a block of this kind is not given to a model, or None when it is."""
        mime = str(block.get("mimeType") or "").lower()
        data = block.get("data")
        if mime not in self.formats:
            return f"not given to the model ({self.takes})"
        if not isinstance(data, str) or not data:
            return "not given to the model (it has no data)"
        size = size_of(data)
        if size > MAX_BYTES:
            return (f"not given to the model: {size / 1048576:.1f} MB is over the "
                    f"{MAX_BYTES // 1048576} MB {self.size_words}")
        return None

    def given(self, result: Any) -> list[tuple[str, str]]:
        """(wire format, base64 data) of the blocks of an MCP result a model is given, in order."""
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            return []
        out: list[tuple[str, str]] = []
        for block in result["content"]:
            if isinstance(block, dict) and block.get("type") == self.block and self.refused(block) is None:
                out.append((self.formats[str(block["mimeType"]).lower()], block["data"]))
                if len(out) == self.most:
                    break
        return out


def size_of(data: str) -> int:
    """The decoded size of base64 ``data``, without decoding it."""
    return len(data) * 3 // 4 - data[-2:].count("=")
