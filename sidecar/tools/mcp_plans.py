"""The render plan an MCP tool's result gets when no override sets one: chosen by its content.

- an image in the result: the ``image`` renderer, naming the result's image blocks by position
  (``images: [{index, mimeType}]``: the UI reads the data from the result, so the plan never holds
  a second copy of it), with the result's text as the caption;
- code: an embedded text resource of a code type (``text/x-python``, ``application/json``, ...),
  a text that is one fenced block, or structured content alone: the ``code`` renderer with a
  language;
- any other text (resource links as Markdown links when they are http(s)): ``document``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

_FENCED = re.compile(r"\A\s*```([A-Za-z0-9_+#.-]*)[^\n]*\n(.*?)\n?```\s*\Z", re.DOTALL)
_PROSE = {"text/plain", "text/markdown", "text/x-markdown", ""}
_LANGUAGES = {"javascript": "javascript", "ecmascript": "javascript", "typescript": "typescript",
              "x-sh": "shell", "x-shellscript": "shell", "sh": "shell", "x-yaml": "yaml", "yaml": "yaml",
              "json": "json", "xml": "xml", "html": "html", "css": "css", "x-python": "python",
              "x-python-code": "python", "sql": "sql", "toml": "toml", "x-toml": "toml", "csv": "csv"}
MAX_CAPTION = 500


def language_of(mime_type: str) -> str:
    """A code renderer's language from a MIME type: ``text/x-rust`` -> ``rust``; ``auto`` when unknown."""
    subtype = mime_type.partition("/")[2].split(";")[0].strip().lower()
    if subtype in _LANGUAGES:
        return _LANGUAGES[subtype]
    if subtype.endswith("+json"):
        return "json"
    if subtype.endswith("+xml"):
        return "xml"
    return subtype.removeprefix("x-") or "auto"


def default_plan(result: Any) -> dict[str, Any] | None:
    """The plan for a successful MCP result (``{"content": [...], "structuredContent"?}``)."""
    if not isinstance(result, dict):
        return None
    blocks = [b for b in result.get("content") or [] if isinstance(b, dict)]
    images = [{"index": i, "mimeType": str(b.get("mimeType") or "")}
              for i, b in enumerate(result.get("content") or []) if isinstance(b, dict) and b.get("type") == "image"]
    text = "\n\n".join(t for t in (_text_of(b) for b in blocks) if t)
    if images:
        config: dict[str, Any] = {"images": images}
        if text:
            config["caption"] = text[:MAX_CAPTION]
        return _plan("image", config)
    code = [b["resource"] for b in blocks if b.get("type") == "resource" and isinstance(b.get("resource"), dict)
            and isinstance(b["resource"].get("text"), str)
            and str(b["resource"].get("mimeType") or "").split(";")[0].strip().lower() not in _PROSE]
    if len(blocks) == 1 and code:
        resource = code[0]
        return _plan("code", {"content": resource["text"], "language": language_of(str(resource["mimeType"])),
                              "uri": str(resource.get("uri") or "")})
    if fenced := _FENCED.match(text):
        return _plan("code", {"content": fenced[2], "language": fenced[1].lower() or "auto"})
    if not text and result.get("structuredContent") is not None:
        return _plan("code", {"content": json.dumps(result["structuredContent"], ensure_ascii=False, indent=2),
                              "language": "json"})
    if not text:
        return None
    return _plan("document", {"content": text})


def _text_of(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "resource":
        resource = block.get("resource") or {}
        return str(resource.get("text") or "") if isinstance(resource, dict) else ""
    if kind == "resource_link":
        uri = str(block.get("uri") or "")
        title = str(block.get("title") or block.get("name") or uri)
        # The server's words go into Markdown the UI renders: a title or URI must not add links of
        # its own (a title "x](javascript:...)", a URI with ")" or a space).
        if uri.lower().startswith(("https://", "http://")):
            return f"[{_md(title)}]({quote(uri, safe=_URI_SAFE)})"
        return f"{_md(title)} ({_md(uri)})"
    return ""


_MD_SPECIAL = re.compile(r"[\\`\[\]<>]")  # what could open a link, an autolink, HTML or code
_URI_SAFE = "/:?#[]@!$&'*+,;=%~-._"  # what a URI keeps as it is; "(", ")", spaces and "<>" are %-encoded


def _md(text: str) -> str:
    """``text`` with each mark that could make a link, HTML or code of it escaped."""
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text)


def _plan(renderer: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"renderer": renderer, "config": config, "missing": []}
