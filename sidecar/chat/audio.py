"""Sound from tool results (MCP audio content) as a model is given it: real audio for a model that
takes it (OpenAI's ``input_audio``: wav or mp3 only), within the size pictures are held to; the
rest named in the text with why."""

from __future__ import annotations

from typing import Any, Literal

from .images import MAX_BYTES, size_of
from .providers.base import AudioPart

# The formats OpenAI's ``input_audio`` takes, by the MIME types servers give them under.
FORMATS: dict[str, Literal["wav", "mp3"]] = {
    "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3", "audio/mp3": "mp3"}
MAX_CLIPS = 4
"""The most clips of one result given to a model."""
TOO_MANY = f"not given to the model (it is given the first {MAX_CLIPS} of a result)"


def refused(block: dict[str, Any]) -> str | None:
    """Why an audio block is not given to a model, or None when it is."""
    mime = str(block.get("mimeType") or "").lower()
    data = block.get("data")
    if mime not in FORMATS:
        return "not given to the model (a model takes wav or mp3 only)"
    if not isinstance(data, str) or not data:
        return "not given to the model (it has no data)"
    size = size_of(data)
    if size > MAX_BYTES:
        return (f"not given to the model: {size / 1048576:.1f} MB is over the "
                f"{MAX_BYTES // 1048576} MB a model is given")
    return None


def of(result: Any) -> list[AudioPart]:
    """The clips of an MCP result a model is given, in order (at most ``MAX_CLIPS``)."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return []
    out: list[AudioPart] = []
    for block in result["content"]:
        if isinstance(block, dict) and block.get("type") == "audio" and refused(block) is None:
            out.append(AudioPart(FORMATS[str(block["mimeType"]).lower()], block["data"]))
            if len(out) == MAX_CLIPS:
                break
    return out
