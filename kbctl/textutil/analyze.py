"""Text analysis for the BM25 lane: the same tokens at ingest and at query time.

Words are lower-cased, English stopwords dropped and the rest stemmed with Snowball (PyStemmer).
Identifiers that mix letters and digits with ``-``, ``_``, ``.`` or ``/`` (``LMN-4012``,
``E_RATE_LIMITED``, ``v3.14.2``, ``SKU-TEAM-ANNUAL-2024``) are also kept whole and unstemmed, so an
exact error code or version matches exactly, while its parts still match loosely.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

__all__ = ["Analyzer", "get_analyzer", "ENGLISH_STOPWORDS", "MAX_TERM_CHARS"]

# A term is cut to this many characters (at most 1 KB in UTF-8): a word of a megabyte of letters, or
# a run of Chinese without punctuation, was one term whose B-tree row PostgreSQL refuses (past about
# 2.7 KB), failing the whole run. Cut the same way at query time, such a word is still found.
MAX_TERM_CHARS = 256

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don""".split()
)

_WORD = re.compile(r"\w\w+|\d", re.UNICODE)
_IDENT = re.compile(r"\b[\w]+(?:[-_./][\w]+)+\b", re.UNICODE)


class Analyzer:
    """Tokenizer + stopwords + stemmer for one language."""

    def __init__(self, language: str = "english") -> None:
        self.language = language
        self.stopwords = ENGLISH_STOPWORDS if language == "english" else frozenset()
        self._stem = None
        if language != "none":
            import Stemmer

            self._stem = Stemmer.Stemmer(language).stemWord

    def words(self, text: str) -> list[str]:
        """The words of ``text``, lower-cased, stopwords dropped, in order with repeats (unstemmed)."""
        return [w for w in _WORD.findall(text.lower()) if w not in self.stopwords]

    def stem(self, word: str) -> str:
        """``word``'s Snowball stem (itself for language ``none``)."""
        return self._stem(word) if self._stem else word

    def terms(self, text: str) -> list[str]:
        """Index terms of ``text`` in order, with repeats."""
        stem = self._stem  # inline (no method call per word): this runs over every chunk at ingest
        out = [stem(w) for w in self.words(text)] if stem else self.words(text)
        for m in _IDENT.finditer(text):
            ident = m.group(0)
            if any(c.isdigit() for c in ident) or "_" in ident or ident.isupper():
                out.append(ident.lower())
        return [t[:MAX_TERM_CHARS] if len(t) > MAX_TERM_CHARS else t for t in out]

    def counts(self, text: str, title: str = "", title_weight: float = 1.0, own_heading: str = "") -> dict[str, float]:
        """Term frequencies of a chunk; title terms count ``title_weight`` times each.

        ``title`` is the chunk's header (document title and heading path). The chunk's own section
        heading (``own_heading``, the last of the path unless it is the title) names what the
        section is about, so its terms count ``OWN_HEADING_WEIGHT`` times more: a section headed
        "LMN-4012 — E_SCOPE_DENIED" outranks a shorter one that merely mentions LMN-4012.
        """
        tf: dict[str, float] = dict(Counter(self.terms(text)))
        if title:
            for t in self.terms(title):
                tf[t] = tf.get(t, 0) + title_weight
        if own_heading:
            for t in self.terms(own_heading):
                tf[t] = tf.get(t, 0) + OWN_HEADING_WEIGHT
        return tf


# Extra term frequency of each term of a chunk's own section heading (on top of the header's).
OWN_HEADING_WEIGHT = 2.0


@lru_cache(maxsize=8)
def get_analyzer(language: str = "english") -> Analyzer:
    """A cached analyzer for a language (Snowball stemmer names: english, french, german…)."""
    return Analyzer(language)
