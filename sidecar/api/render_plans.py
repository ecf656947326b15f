"""How a tool call's result is shown (seed 000 §5): the renderers and the render plan a call
record carries for the UI."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import msgspec

from .base import Model

# How a tool call's result is shown (seed 000 §5); image: a picture from a workspace file, base64
# content, or (an MCP result's default) the result's image blocks by position.
Renderer = Literal["code", "document", "html", "frame", "image"]
RENDERERS: tuple[str, ...] = get_args(Renderer)


_MISSING_DOC = "Expressions of the renderer config that resolved to nothing (left null or empty in config)."
_PlanMissing = Annotated[list[str], msgspec.Meta(description=_MISSING_DOC)]
_PlanConfig = Annotated[dict[str, Any], msgspec.Meta(description="The renderer config with $-expressions filled.")]


class CodePlan(Model, tag="code", tag_field="renderer"):
    """Show a workspace file or content as code."""

    config: _PlanConfig
    missing: _PlanMissing = []


class DocumentPlan(Model, tag="document", tag_field="renderer"):
    """Show a workspace file or content as a document (markdown)."""

    config: _PlanConfig
    missing: _PlanMissing = []


class HtmlPlan(Model, tag="html", tag_field="renderer"):
    """Show the toolset's HTML artifact (tools/htmlPage) in a sandboxed frame."""

    config: _PlanConfig
    missing: _PlanMissing = []


class FramePlan(Model, tag="frame", tag_field="renderer"):
    """Show a page a local server serves, in a frame."""

    config: _PlanConfig
    missing: _PlanMissing = []


class ImagePlan(Model, tag="image", tag_field="renderer"):
    """Show a picture: a workspace file (file), base64 data (content, with mimeType), or image blocks
    of the call's MCP result by position (images: [{index, mimeType}], an MCP result's default plan;
    caption: the result's text)."""

    config: _PlanConfig
    missing: _PlanMissing = []


class CardConfig(Model):
    """A card (seed 004 output contract): a title, sanitised HTML and the manifest's colours."""

    title: Annotated[str, msgspec.Meta(description=(
        "Plain text, one line: the manifest's title template filled from the call's arguments, or the "
        "title the tool returned. Show it as text, never as HTML."))]
    html: Annotated[str, msgspec.Meta(description=(
        "An HTML fragment already sanitised (no script, event handler, style element, form, frame, "
        "object, embed, base, meta, link, svg or math; inline styles from an allow-list; only http(s) "
        "and mailto URLs; no position, z-index or transform). It may go into an element's innerHTML as it "
        "is; give that element overflow: hidden, as margins and sizes may still reach past the card."))]
    accent_color: Annotated[str | None, msgspec.Meta(description=(
        "A CSS colour (#rgb, #rrggbb, #rrggbbaa, rgb(), rgba(), hsl(), hsla() or a named colour) for "
        "the card's accent."))] = None
    background_color: Annotated[str | None, msgspec.Meta(description=(
        "A CSS colour, of the same forms, for the card's background."))] = None


class CardPlan(Model, tag="card", tag_field="renderer"):
    """Show the tool's card: the tool declared output.card and returned {text?, html?, title?}."""

    config: Annotated[CardConfig, msgspec.Meta(description="The card to show: title, sanitised HTML, colours.")]
    missing: Annotated[list[str], msgspec.Meta(description=(
        "{{arg}} holes of the title template whose argument was not given (left empty)."))] = []


# How a call's result is shown, told apart by its renderer.
RenderPlan = CodePlan | DocumentPlan | HtmlPlan | FramePlan | ImagePlan | CardPlan
