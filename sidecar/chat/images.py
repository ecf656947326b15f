"""Pictures from tool results (MCP image content) as a model is given them: real images for a
model that takes them, within what the model APIs accept; the rest named in the text with why."""

from __future__ import annotations

from typing import Any

from .providers.base import ImagePart

# The image types both the Anthropic and the OpenAI APIs take.
TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_BYTES = 5 * 1024 * 1024
"""The largest picture given to a model (Anthropic's limit per image; OpenAI's is higher)."""
MAX_IMAGES = 8
"""The most pictures of one result given to a model."""
TOO_MANY = f"not given to the model (it is given the first {MAX_IMAGES} of a result)"


def size_of(data: str) -> int:
    """The decoded size of base64 ``data``, without decoding it."""
    return len(data) * 3 // 4 - data[-2:].count("=")


def refused(block: dict[str, Any]) -> str | None:
    """Why an image block is not given to a model, or None when it is."""
    mime = str(block.get("mimeType") or "").lower()
    data = block.get("data")
    if mime not in TYPES:
        return f"not given to the model (it takes {', '.join(sorted(TYPES))})"
    if not isinstance(data, str) or not data:
        return "not given to the model (it has no data)"
    size = size_of(data)
    if size > MAX_BYTES:
        return (f"not given to the model: {size / 1048576:.1f} MB is over the "
                f"{MAX_BYTES // 1048576} MB a model takes")
    return None


def of(result: Any) -> list[ImagePart]:
    """The pictures of an MCP result a model is given, in order (at most ``MAX_IMAGES``)."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return []
    out: list[ImagePart] = []
    for block in result["content"]:
        if isinstance(block, dict) and block.get("type") == "image" and refused(block) is None:
            out.append(ImagePart(str(block["mimeType"]).lower(), block["data"]))
            if len(out) == MAX_IMAGES:
                break
    return out
