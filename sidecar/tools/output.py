"""How a tool's output is shown (seed 004 ``output``): as a card to the user, and how much of it,
in what form, the model is given. One model for every kind of tool that has a manifest (Python
tools, MCP tools a toolset declares, HTTP tools later).

    output:
      card: {enabled: true, title: "Weather in {{location}}", accent_color: "#4a90d4",
             background_color: "rgba(74, 144, 212, 0.10)"}
      synthesize: false     # the model hears that a card was shown, not the text
      ephemeral: true       # later turns do not see the result again
      max_chars: 3000       # the most the model is given of one result; the rest goes to a file
      strip_actions: true   # drop lines of the result that read like orders to the assistant
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

# Seed 004 truncates tool output to 3,000 characters before the model sees it.
DEFAULT_MAX_CHARS = 3000
# The built-in file and shell tools are how a model reads the workspace: they keep the 16 KB the
# context took before seed 004's limit (the rest still goes to a file the model can page through).
BUILTIN_MAX_CHARS = 16 * 1024

_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_PCT = rf"{_NUM}%"
_ALPHA = rf"{_NUM}%?"
_HUE = rf"{_NUM}(?:deg|grad|rad|turn)?"
_RGB = (rf"rgba?\(\s*(?:{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}|{_PCT}\s*,\s*{_PCT}\s*,\s*{_PCT})\s*(?:,\s*{_ALPHA}\s*)?\)"
        rf"|rgba?\(\s*{_NUM}%?\s+{_NUM}%?\s+{_NUM}%?\s*(?:/\s*{_ALPHA}\s*)?\)")
_HSL = (rf"hsla?\(\s*{_HUE}\s*,\s*{_PCT}\s*,\s*{_PCT}\s*(?:,\s*{_ALPHA}\s*)?\)"
        rf"|hsla?\(\s*{_HUE}\s+{_PCT}\s+{_PCT}\s*(?:/\s*{_ALPHA}\s*)?\)")
_HEX = r"#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})"
# CSS Color Module Level 4, named colours, plus the two keywords a colour property takes.
NAMED_COLOURS = frozenset("""
aliceblue antiquewhite aqua aquamarine azure beige bisque black blanchedalmond blue blueviolet brown
burlywood cadetblue chartreuse chocolate coral cornflowerblue cornsilk crimson cyan darkblue darkcyan
darkgoldenrod darkgray darkgreen darkgrey darkkhaki darkmagenta darkolivegreen darkorange darkorchid
darkred darksalmon darkseagreen darkslateblue darkslategray darkslategrey darkturquoise darkviolet
deeppink deepskyblue dimgray dimgrey dodgerblue firebrick floralwhite forestgreen fuchsia gainsboro
ghostwhite gold goldenrod gray green greenyellow grey honeydew hotpink indianred indigo ivory khaki
lavender lavenderblush lawngreen lemonchiffon lightblue lightcoral lightcyan lightgoldenrodyellow
lightgray lightgreen lightgrey lightpink lightsalmon lightseagreen lightskyblue lightslategray
lightslategrey lightsteelblue lightyellow lime limegreen linen magenta maroon mediumaquamarine
mediumblue mediumorchid mediumpurple mediumseagreen mediumslateblue mediumspringgreen
mediumturquoise mediumvioletred midnightblue mintcream mistyrose moccasin navajowhite navy oldlace
olive olivedrab orange orangered orchid palegoldenrod palegreen paleturquoise palevioletred
papayawhip peachpuff peru pink plum powderblue purple rebeccapurple red rosybrown royalblue
saddlebrown salmon sandybrown seagreen seashell sienna silver skyblue slateblue slategray slategrey
snow springgreen steelblue tan teal thistle tomato turquoise violet wheat white whitesmoke yellow
yellowgreen transparent currentcolor
""".split())
_COLOUR = re.compile(rf"(?:{_HEX}|{_RGB}|{_HSL})(?![\s\S])")


def is_css_colour(value: str) -> bool:
    """A colour written in one of the plain CSS forms: ``#rgb[a]``, ``#rrggbb[aa]``, ``rgb()``/
    ``rgba()``/``hsl()``/``hsla()`` with numbers only, or a named colour. Nothing else (no
    ``var()``, ``url()``, ``expression()``, escapes or ``;``) can reach a style attribute."""
    return value.lower() in NAMED_COLOURS or _COLOUR.match(value) is not None


class _Decl(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    pass


class CardDecl(_Decl):
    enabled: bool = True
    # Plain text with {{arg}} holes filled from the call's arguments; the result's title wins.
    title: Annotated[str, msgspec.Meta(max_length=500)] | None = None
    accent_color: str | None = None
    background_color: str | None = None


class OutputDecl(_Decl):
    card: CardDecl | None = None
    synthesize: bool = True
    ephemeral: bool = False
    max_chars: Annotated[int, msgspec.Meta(ge=200, le=1_000_000)] = DEFAULT_MAX_CHARS
    strip_actions: bool = False

    @property
    def shows_card(self) -> bool:
        return self.card is not None and self.card.enabled


COLOUR_FIELDS = ("accent_color", "background_color")
COLOUR_HINT = ("not a CSS colour: write #rgb, #rrggbb, #rrggbbaa, rgb(r, g, b), rgba(r, g, b, a), "
               "hsl(h, s%, l%) or a named colour such as steelblue")


def check_colours(output: OutputDecl) -> str | None:
    """The field (``card.accent_color``) holding a value that is not a CSS colour, if any."""
    card = output.card
    if card is None:
        return None
    for name in COLOUR_FIELDS:
        value = getattr(card, name)
        if value is not None and not is_css_colour(value):
            return f"card.{name}"
    return None


def stored(output: OutputDecl | None) -> dict[str, Any] | None:
    """The declaration as kept in a tool's config and written back on export: only what differs
    from the defaults, None when nothing does."""
    if output is None:
        return None
    return msgspec.to_builtins(output) or None


def of_config(config: dict[str, Any]) -> OutputDecl:
    """The declaration a tool's stored config holds (the defaults when it holds none)."""
    raw = config.get("output")
    return msgspec.convert(raw, OutputDecl) if raw else _DEFAULT


_DEFAULT = OutputDecl()
