"""tools/query.py's Text: which words a hit holds (a search's ``matched``), looked up without a
regular expression per term; it must say exactly what the patterns it replaced said."""

from __future__ import annotations

import random
import re

from sidecar.tools.query import Text

# Letters, digits (Arabic-Indic and superscript ones too), '_' (not a letter), marks, spaces.
ALPHABET = "ab" + "ç" + "٣" + "²" + "_-: .\u200f" + "中"


def _whole(text: str, term: str) -> bool:
    return re.search(rf"(?<![^\W_]){re.escape(term)}(?![^\W_])", text) is not None


def _inside(text: str, part: str) -> str | None:
    found = re.search((r"(?<![^\W_])" if len(part) < 3 else r"[^\W_]*") + re.escape(part) + r"[^\W_]*", text)
    return found.group(0) if found is not None else None


def test_whole_words_and_words_inside_words_as_the_patterns_said():
    rng = random.Random(28)
    for _ in range(20_000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 14)))
        part = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3)))
        t = Text(text)
        assert t.holds(part) == _whole(t.text, part), (text, part)
        assert t.containing(part) == _inside(t.text, part), (text, part)


def test_examples():
    t = Text("Research the Web: search_web, re-search")
    assert t.holds("search") and t.holds("web") and not t.holds("sea")
    assert t.containing("arch") == "research"
    assert t.containing("se") == "search"  # shorter than a trigram: at a word's start only
    assert t.containing("xyz") is None
