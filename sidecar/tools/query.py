"""What people type, understood against the words the tool catalog holds (tools/search and the
lexical ranker): each word of a query stands for the index's words it most likely means.

- A word stands for itself when the index has it, and for the index's words of the same stem
  (Snowball's English stemmer, PyStemmer): "commits" finds commit and committed.
- A word with neither stands for its nearest words in the index's vocabulary (fts5vocab): the fewest
  edits away (optimal string alignment, so a swap of two letters is one edit: "qoute" -> "quote"),
  at most one edit for four or five characters and two from six ("weathr" -> "weather", "stck" ->
  "stock"), or the words it begins ("calend" -> "calendar"). Rapidfuzz measures the distance; the
  commonest of the equally near words are kept. Three characters or fewer are too short to guess
  from ("git" is one edit from "get", "gif" and "bit").
- Common English words ("the", "me", "what", "on") are left out when the query has other words:
  "what's on my calendar" searches "calendar". The index's own common words ("file" in a catalog of
  file tools) weigh little by bm25's IDF.
- A word that stands for nothing is ignored: "show me yesterday's commits" still finds the tools
  for commits.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..store.tool_search import TRIGRAM, Vocabulary, quoted, words_of

# A pasted page still searches: its first distinct words decide (each unknown one costs a look-up
# through the vocabulary).
MAX_WORDS = 32
CORRECTIONS = 3  # at most, per word: the commonest of the nearest
FORMS = 4  # other forms of a word, at most (the commonest)
_STEMMED = 4  # shorter words stand for themselves alone ("git" is no form of "gits")
_FORMS_READ = 256  # words read beginning like a stem (a short stem starts many)
_MEMO = 4096  # corrections remembered per vocabulary (the palette asks again at every keystroke)

# Function words and the politeness around a request: they say nothing about which tool is meant.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just let me more
most my myself no nor not of off on once only or other our ours ourselves out over own please same
she should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves s t d ll m re ve y
""".split())


def fold(text: str) -> str:
    """Text as the index holds its words (unicode61 with remove_diacritics 2): case and accents folded."""
    if text.isascii():
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _max_edits(word: str) -> int:
    return 0 if len(word) <= 3 or word.isdigit() else 1 if len(word) <= 5 else 2


class Corrector:
    """The index's vocabulary, to find the words a misspelt one most likely means."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.docs = vocabulary.docs
        self.total = vocabulary.total
        self.sorted = sorted(self.docs)
        self._by_length: dict[int, list[str]] = {}
        for term in self.sorted:
            self._by_length.setdefault(len(term), []).append(term)
        self._memo: dict[str, tuple[str, ...]] = {}
        self._choices: dict[tuple[int, int], list[str]] = {}  # (length, edits) -> the words that near
        self._stemmer: Any = None

    def nearest(self, word: str) -> tuple[str, ...]:
        """The index's words ``word`` most likely means: its forms the index holds (itself, and
        the words of the same stem: "commits" -> commit, committed), else its nearest spellings."""
        found = self._memo.get(word)
        if found is None:
            found = self._forms(word) or self._nearest(word)
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            self._memo[word] = found
        return found

    def _forms(self, word: str) -> tuple[str, ...]:
        held = (word,) if word in self.docs else ()
        if len(word) < _STEMMED or word.isdigit():
            return held
        stemmer = self._stemmer
        if stemmer is None:
            import Stemmer  # PyStemmer: the Snowball stemmers

            stemmer = self._stemmer = Stemmer.Stemmer("english")
        stem = stemmer.stemWord(word)
        # The words sharing a stem begin with most of it ("studi": study, studies).
        head = stem[:max(_STEMMED - 1, len(stem) - 1)]
        start = bisect.bisect_left(self.sorted, head)
        same: list[str] = []
        for term in self.sorted[start:start + _FORMS_READ]:
            if not term.startswith(head):
                break
            if term != word and stemmer.stemWord(term) == stem:
                same.append(term)
        same.sort(key=lambda t: -self.docs[t])
        return held + tuple(same[:FORMS])

    def _nearest(self, word: str) -> tuple[str, ...]:
        edits = _max_edits(word)
        if not edits:
            return ()
        from rapidfuzz import process
        from rapidfuzz.distance import OSA

        # (distance, -documents, term): a completion of the word counts as one edit away.
        near: dict[str, tuple[int, int, str]] = {}
        start = bisect.bisect_left(self.sorted, word)
        for term in self.sorted[start:start + 64]:
            if not term.startswith(word):
                break
            near[term] = (1, -self.docs[term], term)
        choices = self._choices.get((len(word), edits))
        if choices is None:  # (a few lengths: kept, not gathered again for every word)
            choices = self._choices[len(word), edits] = [
                t for n in range(len(word) - edits, len(word) + edits + 1) for t in self._by_length.get(n, ())]
        for term, distance, _ in process.extract(word, choices, scorer=OSA.distance, score_cutoff=edits,
                                                 limit=None):
            near[term] = min(near.get(term, (edits + 1, 0, term)), (int(distance), -self.docs[term], term))
        if not near:
            return ()
        best = min(near.values())[0]
        return tuple(t for _, _, t in sorted(v for v in near.values() if v[0] == best)[:CORRECTIONS])


@dataclass(frozen=True, slots=True)
class QueryWord:
    typed: str  # folded
    terms: tuple[str, ...]  # the index's words it stands for; empty: none
    stop: bool  # a common English word (kept only when the query has nothing else)

    @property
    def corrected(self) -> bool:
        """Found only as other words: another form, or a misspelling's nearest."""
        return self.typed not in self.terms


def understand(q: str, corrector: Corrector) -> list[QueryWord]:
    """The query's distinct words (the first MAX_WORDS that count), each with what it stands for."""
    folded = list(dict.fromkeys(fold(w) for w in words_of(q)))
    content = [w for w in folded if w not in STOP_WORDS]
    kept = content[:MAX_WORDS] if content else folded[:MAX_WORDS]
    return [QueryWord(w, corrector.nearest(w), not content) for w in kept]


def any_of(words: list[QueryWord]) -> str | None:
    """An FTS5 expression finding a document holding any word the query stands for (None: no word
    of the query stands for any of the index's)."""
    terms = list(dict.fromkeys(t for w in words for t in w.terms))
    return " OR ".join(quoted(t) for t in terms) if terms else None


class Text:
    """A document's indexed text, folded, asked which words it holds (a look for each of the
    query's few words: cheaper than cutting kilobytes of description into words).

    Looked up with str.find and a check of the characters either side (str.isalnum is what the
    regular expression ``[^\\W_]`` means for one character): a query's terms are new words at
    almost every search, and compiling a pattern for each cost more than the whole look-up."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = fold(text)

    def holds(self, term: str) -> bool:
        """Whether ``term`` is one of its words (whole: neither side next to a letter or digit)."""
        text, n = self.text, len(term)
        at = text.find(term)
        while at >= 0:
            end = at + n
            if (at == 0 or not text[at - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
                return True
            at = text.find(term, at + 1)
        return False

    def containing(self, part: str) -> str | None:
        """Its first word holding ``part`` (one shorter than a trigram: at its start)."""
        text = self.text
        at = text.find(part)
        if at < 0:
            return None
        if not part.isalnum():  # (a folded word that is not one run of letters and digits)
            found = _inside(part, len(part) < TRIGRAM).search(text)
            return found.group(0) if found is not None else None
        if len(part) < TRIGRAM:
            while at > 0 and text[at - 1].isalnum():
                at = text.find(part, at + 1)
                if at < 0:
                    return None
        # The whole word around it: the run of letters and digits it lies in.
        start, end = at, at + len(part)
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        while end < len(text) and text[end].isalnum():
            end += 1
        return text[start:end]


@functools.lru_cache(maxsize=256)
def _inside(part: str, at_start: bool) -> re.Pattern[str]:
    return re.compile((r"(?<![^\W_])" if at_start else r"[^\W_]*") + re.escape(part) + r"[^\W_]*")


def matched(words: list[QueryWord], text: Text, *, inside: bool = False) -> list[tuple[str, str]]:
    """Which query words a document holds, as (typed, term) pairs. ``inside``: a word it holds
    only inside one of its words counts too, as tools/search finds it ("arch" in "research"; a
    word shorter than a trigram at the start of one)."""
    pairs: list[tuple[str, str]] = []
    for w in words:
        found = [t for t in w.terms if text.holds(t)]
        if not found and inside and (word := text.containing(w.typed)) is not None:
            found = [word]
        pairs += [(w.typed, t) for t in found]
    return pairs


def why(words: list[QueryWord], text: Text) -> str:
    """The words a document holds said for a user: "words: git, commit (from 'comit')"."""
    said: list[str] = []
    for w in words:
        found = [t for t in w.terms if text.holds(t)]
        if found:
            said.append(", ".join(found) + (f" (from '{w.typed}')" if w.corrected else ""))
    return ("words: " + ", ".join(said)) if said else "no word of the query"
