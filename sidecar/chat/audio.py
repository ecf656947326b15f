"""Sound from tool results (MCP audio content) as a model is given it: real audio for a model that
takes it (OpenAI's ``input_audio``: wav or mp3 only), within the size pictures are held to; the
rest named in the text with why (the rules: ``media``)."""

from __future__ import annotations

from typing import Any, Literal, cast

from .media import Kind
from .providers.base import AudioPart

__all__ = ["KIND", "MAX_CLIPS", "of"]

# The formats OpenAI's ``input_audio`` takes, by the MIME types servers give them under.
FORMATS: dict[str, Literal["wav", "mp3"]] = {
    "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3", "audio/mp3": "mp3"}
MAX_CLIPS = 4
"""The most clips of one result given to a model."""
KIND = Kind("audio", FORMATS, "a model takes wav or mp3 only", "a model is given", MAX_CLIPS)


def of(result: Any) -> list[AudioPart]:
    """The clips of an MCP result a model is given, in order (at most ``MAX_CLIPS``)."""
    return [AudioPart(cast(Literal["wav", "mp3"], fmt), data) for fmt, data in KIND.given(result)]
