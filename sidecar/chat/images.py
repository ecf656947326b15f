"""Pictures from tool results (MCP image content) as a model is given them: real images for a
model that takes them, within what the model APIs accept; the rest named in the text with why
(the rules: ``media``)."""

from __future__ import annotations

from typing import Any

from .media import MAX_BYTES, Kind
from .providers.base import ImagePart

__all__ = ["KIND", "MAX_BYTES", "MAX_IMAGES", "of"]

# The image types both the Anthropic and the OpenAI APIs take (named on the wire as they are).
TYPES = ("image/gif", "image/jpeg", "image/png", "image/webp")
MAX_IMAGES = 8
"""The most pictures of one result given to a model."""
KIND = Kind("image", {t: t for t in TYPES}, f"it takes {', '.join(TYPES)}", "a model takes", MAX_IMAGES)


def of(result: Any) -> list[ImagePart]:
    """The pictures of an MCP result a model is given, in order (at most ``MAX_IMAGES``)."""
    return [ImagePart(mime, data) for mime, data in KIND.given(result)]
