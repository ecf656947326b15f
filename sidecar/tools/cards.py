"""Cards (seed 004's output contract): a tool that declares ``output.card`` returns
``{text?, html?, title?, error?}`` and the user sees a card: a title, the tool's HTML made safe,
and the colours its manifest chose.

The HTML is a fragment sanitised with nh3 (ammonia) on an allow-list: ordinary text and layout
tags, inline ``style`` only (each declaration checked: known properties, values made of numbers,
words and colour or size functions, so no ``url()``, ``expression()``, escapes or ``@import``),
links and images over http(s) only (mailto for links), no relative URL (it would point into the
app), no script, style element, event handler, form, frame, object, embed, base, meta, link, svg or
math. What the UI gets can go into ``innerHTML`` as it is.
"""

from __future__ import annotations

import html as htmllib
import json
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from .output import OutputDecl

if TYPE_CHECKING:
    import nh3

CARD_KEYS = ("text", "html", "title", "error")
MAX_TITLE = 200
MAX_HTML = 512 * 1024  # characters of a tool's HTML that are sanitised; the rest is dropped

# Content that must go with its tag (unwrapping would show code or a nested document as text).
_DROP_WITH_CONTENT = {"script", "style", "template", "noscript", "iframe", "frame", "frameset", "object",
                      "embed", "applet", "svg", "math", "title", "textarea", "xmp", "noembed", "noframes",
                      "select", "plaintext", "head"}
_TAGS = {
    "a", "abbr", "article", "aside", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col",
    "colgroup", "data", "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure",
    "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "i", "img", "ins", "kbd", "li",
    "mark", "nav", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp", "small", "span", "strong", "sub",
    "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "u", "ul", "var", "wbr",
}
_ATTRIBUTES = {
    "*": {"style", "title", "lang", "dir"},
    "a": {"href", "hreflang"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "col": {"span"}, "colgroup": {"span"},
    "ol": {"start", "reversed"},
    "time": {"datetime"}, "data": {"value"},
    "details": {"open"},
}
_SIDES = ("top", "right", "bottom", "left")
STYLE_PROPERTIES = frozenset({
    "color", "background", "background-color", "opacity",
    "font", "font-family", "font-size", "font-style", "font-weight", "font-variant", "line-height",
    "letter-spacing", "word-spacing", "text-align", "text-decoration", "text-decoration-color",
    "text-decoration-line", "text-decoration-style", "text-transform", "text-indent", "text-overflow",
    "text-shadow", "white-space", "word-break", "overflow-wrap", "word-wrap", "vertical-align", "direction",
    "margin", *(f"margin-{s}" for s in _SIDES), "padding", *(f"padding-{s}" for s in _SIDES),
    "border", "border-color", "border-style", "border-width", "border-radius", "border-collapse",
    "border-spacing", *(f"border-{s}{p}" for s in _SIDES for p in ("", "-color", "-style", "-width")),
    "border-top-left-radius", "border-top-right-radius", "border-bottom-left-radius",
    "border-bottom-right-radius",
    "width", "height", "min-width", "max-width", "min-height", "max-height", "box-sizing", "box-shadow",
    "aspect-ratio", "object-fit",
    "display", "flex", "flex-direction", "flex-wrap", "flex-flow", "flex-grow", "flex-shrink", "flex-basis",
    "gap", "row-gap", "column-gap", "align-items", "align-content", "align-self", "justify-content",
    "justify-items", "justify-self", "order", "grid-template-columns", "grid-template-rows", "grid-column",
    "grid-row", "grid-gap",
    "overflow", "overflow-x", "overflow-y", "float", "clear", "list-style-type", "list-style-position",
    "table-layout", "caption-side", "empty-cells", "tab-size",
})
# Functions a value may call: colours, sizes and gradients. Anything else (url, image, image-set,
# expression, var, attr, element, cross-fade, paint) can fetch, run or reach outside the card.
_FUNCTIONS = frozenset({"", "rgb", "rgba", "hsl", "hsla", "calc", "min", "max", "clamp", "linear-gradient",
                        "radial-gradient", "repeating-linear-gradient", "repeating-radial-gradient"})
_VALUE = re.compile(r"[A-Za-z0-9#%.,\s+*/!'\"()-]*(?![\s\S])")
_CALLS = re.compile(r"([A-Za-z-]*)\(")
_PROPERTY = re.compile(r"\s*([A-Za-z-]+)\s*:([\s\S]*)")


_PLAIN = re.compile(r"[A-Za-z0-9#%.,\s:;+!'\"-]*(?![\s\S])")


def safe_style(value: str) -> str | None:
    """The declarations of a style attribute that are known to be harmless, or None if none is.

    nh3 then keeps only the allowed properties and writes what is left out again (which decodes
    CSS escapes: hence none may reach it)."""
    if _PLAIN.match(value):
        return value  # no function, escape, comment or at-rule: only the property names matter
    kept = []
    for declaration in value.split(";"):
        m = _PROPERTY.fullmatch(declaration)
        if m is None:
            continue
        prop, val = m[1].lower(), m[2].strip()
        if prop not in STYLE_PROPERTIES or not val or not _VALUE.match(val) or "/*" in val:
            continue
        if any(name.lower() not in _FUNCTIONS for name in _CALLS.findall(val)):
            continue
        kept.append(f"{prop}: {val}")
    return "; ".join(kept) or None


def _attribute(tag: str, attribute: str, value: str) -> str | None:
    return safe_style(value) if attribute == "style" else value


@cache
def _cleaner() -> nh3.Cleaner:
    import nh3  # deferred: the sanitiser is only needed once a card is shown

    return nh3.Cleaner(
        tags=_TAGS, clean_content_tags=_DROP_WITH_CONTENT, attributes=_ATTRIBUTES, attribute_filter=_attribute,
        strip_comments=True, link_rel="noopener noreferrer nofollow", url_schemes={"http", "https", "mailto"},
        url_relative="deny", filter_style_properties=set(STYLE_PROPERTIES))


def sanitize(html: str) -> str:
    """``html`` as a fragment that is safe to put into a page's ``innerHTML``."""
    return _cleaner().clean(html[:MAX_HTML])


def as_text(html: str) -> str:
    """What a card's HTML says, without its markup (for the model when the tool gave no text)."""
    import nh3  # deferred: the sanitiser is only needed once a card is shown

    return htmllib.unescape(nh3.clean(html[:MAX_HTML], tags=set(), clean_content_tags=_DROP_WITH_CONTENT))


# -- the result ---------------------------------------------------------------------------------


def fields(result: Any) -> dict[str, str] | None:
    """The ``{text, html, title, error}`` a result carries, or None if it is not card-shaped.

    A dict with at least one of these keys, each a string (or null); other keys are kept out. A
    string is the text. An MCP result carries it as its structured content.
    """
    if isinstance(result, str):
        return {"text": result}
    if not isinstance(result, dict):
        return None
    if isinstance(result.get("content"), list) and "structuredContent" in result:  # an MCP result
        return fields(result["structuredContent"]) if isinstance(result["structuredContent"], dict) else None
    found = {k: result[k] for k in CARD_KEYS if result.get(k) is not None}
    if not found or not all(isinstance(v, str) for v in found.values()):
        return None
    return found


def error_of(output: OutputDecl, result: Any) -> str | None:
    """The error a card tool reported in its result (the call then fails with it)."""
    if not output.shows_card:
        return None
    found = fields(result)
    return found.get("error") or None if found else None


_HOLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")


def title(template: str | None, args: Any, missing: list[str] | None = None) -> str:
    """The manifest's title with each ``{{arg}}`` (or ``{{arg.key}}``) filled from the arguments,
    as plain text: a value is never read as a template again, and an argument that is missing
    leaves its place empty (named in ``missing``)."""

    def fill(m: re.Match[str]) -> str:
        value: Any = args
        for step in m[1].split("."):
            value = value.get(step) if isinstance(value, dict) else None
        if value is None:
            if missing is not None and m[0] not in missing:
                missing.append(m[0])
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return plain(_HOLE.sub(fill, template or ""))


def plain(text: str) -> str:
    """One line of text: control and direction-override characters gone, spaces collapsed, capped."""
    text = " ".join(_CONTROLS.sub(" ", text).split())
    return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"


def plan(output: OutputDecl, args: Any, result: Any) -> dict[str, Any] | None:
    """The ``card`` render plan of a call whose tool declares the card, or None when its result
    is not card-shaped (or holds only an error)."""
    card = output.card
    found = fields(result)
    if card is None or not card.enabled or found is None or "error" in found:
        return None
    missing: list[str] = []
    heading = plain(found["title"]) if found.get("title") else title(card.title, args, missing)
    if "html" in found:
        body = sanitize(found["html"])
    elif "text" in found:
        body = f'<div style="white-space: pre-wrap">{htmllib.escape(found["text"][:MAX_HTML])}</div>'
    else:
        return None
    config: dict[str, Any] = {"title": heading, "html": body}
    if card.accent_color:
        config["accentColor"] = card.accent_color
    if card.background_color:
        config["backgroundColor"] = card.background_color
    return {"renderer": "card", "config": config, "missing": missing}


def model_text(result: Any) -> str | None:
    """What the model reads of a card-shaped result: its title and text (the HTML's words when
    there is no text), never the markup."""
    found = fields(result)
    if found is None:
        return None
    text = found.get("text")
    if text is None and "html" in found:
        text = as_text(found["html"]).strip()
    head = found.get("title")
    return "\n".join(p for p in (head, text) if p)
