"""Tool summary and per-argument descriptions from Google, NumPy or Sphinx docstrings."""

from __future__ import annotations

import re


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``doc`` as ``inspect.getdoc`` gives it (already dedented)."""
    if not doc or not doc.strip():
        return "", {}
    # Imported here: it costs ~25 ms, and only tools with docstrings need it.
    import docstring_parser

    try:
        # The leading newline matters: without it a docstring that opens with "Args:" is read
        # as a reST summary (or fails) instead of a Google section.
        parsed = docstring_parser.parse("\n" + doc.strip())
    except docstring_parser.ParseError:
        return _flow(re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]), {}
    summary = parsed.short_description or ""
    # docstring_parser keeps only the first line as the short description; a summary wrapped
    # over several lines continues in long_description without a blank line between.
    if summary and parsed.long_description and not parsed.blank_after_short_description:
        summary += "\n" + re.split(r"\n\s*\n", parsed.long_description, maxsplit=1)[0]
    params = {p.arg_name: _flow(p.description) for p in parsed.params if p.description}
    return _flow(summary), params


def _flow(text: str) -> str:
    """Join hard-wrapped lines; keep paragraph breaks."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
