"""Text analysis for the BM25 lane: the same tokens at ingest and at query time.

Words are lower-cased, English stopwords dropped and the rest stemmed with Snowball (PyStemmer).
Identifiers that mix letters and digits with ``-``, ``_``, ``.`` or ``/`` (``LMN-4012``,
``E_RATE_LIMITED``, ``v3.14.2``, ``SKU-TEAM-ANNUAL-2024``) are also kept whole and unstemmed, so an
exact error code or version matches exactly, while its parts still match loosely.

Chinese, Japanese and Korean are written without spaces between words (Korean between phrases),
so a run of Han, Hiragana, Katakana or Hangul becomes its overlapping character bigrams ("图书馆"
is 图书, 书馆; a lone character is itself), as Lucene's CJKAnalyzer and Elasticsearch's
``cjk_bigram`` do: a word inside a sentence matches, with no dictionary. Full-width Latin letters,
digits and punctuation are folded to ASCII and half-width Katakana to full width first; CJK terms
are neither stemmed nor stopwords. That is analyzer version 2 (``ANALYZER_VERSION``). Version 1
made a whole run one term; a namespace records the version its postings were made with
(``kbctl.namespaces.analyzer``, migration 019), and is written and searched with it. Text without
CJK or full/half-width characters gives the same terms under both versions.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache

__all__ = [
    "Analyzer",
    "get_analyzer",
    "query_analyzer",
    "ENGLISH_STOPWORDS",
    "MAX_TERM_CHARS",
    "ANALYZER_VERSION",
    "ANALYZER_VERSIONS",
    "has_cjk",
    "plain_words",
]

# The analyzer a new namespace records (1: CJK runs whole; 2: CJK bigrams). A change of what a text's
# terms are is a new version, never an edit of one: a namespace's postings keep meaning what they meant.
ANALYZER_VERSION = 2
ANALYZER_VERSIONS = (1, 2)

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

# Han (with the iteration and closing marks 々〆〇〻, the compatibility ideographs and extensions B
# to H), Hiragana, Katakana (with its phonetic extensions and ー), Hangul syllables and jamo.
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7fb\uf900-\ufaff"
    "\U00020000-\U000323af"
)
# Full-width ASCII (U+FF01 to U+FF5E) and half-width Katakana (U+FF65 to U+FF9F): folded before the words are cut.
_WIDE = "\uff01-\uff5e\uff65-\uff9f"
_NEEDS_CJK = re.compile(f"[{_CJK}{_WIDE}]")
_HAS_CJK = re.compile(f"[{_CJK}]")
_HALF_KANA = re.compile("[\uff65-\uff9f]+")
# A CJK run with the marks that may follow its characters: the combining (semi-)voiced marks of kana
# written decomposed (NFD: テ+゙ for デ) and variation selectors (葛+U+E0100, a glyph of 葛). Text that
# is not NFC (Hangul as jamo from a macOS file name, kana from some PDFs) has its runs composed and
# the selectors dropped, so it gives the terms of the text as it is usually typed.
_VS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"
_RUN_MARKS = re.compile(f"[{_CJK}][{_CJK}\u3099\u309a{_VS}]*")
_SELECTORS = re.compile(f"[{_VS}]")
_FULL_ASCII = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
# A word is a CJK run (group 1), or as in version 1 with CJK characters as boundaries.
_WORD2 = re.compile(f"([{_CJK}]+)|[^\\W{_CJK}]{{2,}}|\\d")
_IDENT2 = re.compile(f"(?<![^\\W{_CJK}])[^\\W{_CJK}]+(?:[-_./][^\\W{_CJK}]+)+(?![^\\W{_CJK}])")


_PLAIN = re.compile(r"\w+", re.UNICODE)
# A CJK run (group 1), or a run of other word characters.
_PLAIN2 = re.compile(f"([{_CJK}]+)|[^\\W{_CJK}]+")


def plain_words(text: str) -> list[str]:
    """The lower-cased ``\\w+`` words of ``text``, stopwords and all, unstemmed, except that a CJK run
    is its character bigrams (folded first, as the analyzer does): the unit that compares texts
    outside the lexical lane (near-duplicate shingles, the ``hash`` embedder's features). Text
    without a Han, Kana or Hangul character gives exactly ``re.findall(r"\\w+", text.lower())``."""
    text = text.lower()
    if not _HAS_CJK.search(text):
        return _PLAIN.findall(text)
    out: list[str] = []
    for m in _PLAIN2.finditer(_fold(text)):
        run = m.group(1)
        if run:
            out.extend(_bigrams(run))
        else:
            out.append(m.group(0))
    return out


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Han, Kana or Hangul character (terms of version 1 and 2 differ)."""
    return _HAS_CJK.search(text) is not None


def _fold(text: str) -> str:
    """Full-width ASCII as ASCII, half-width Katakana as full width (ﾃﾞｰﾀ is データ), CJK runs
    composed (NFC) without variation selectors."""
    text = text.translate(_FULL_ASCII)
    text = _HALF_KANA.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)
    if unicodedata.is_normalized("NFC", text) and not _SELECTORS.search(text):
        return text
    return _RUN_MARKS.sub(lambda m: unicodedata.normalize("NFC", _SELECTORS.sub("", m.group(0))), text)


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


class Analyzer:
    """Tokenizer + stopwords + stemmer for one language, at one analyzer version."""

    def __init__(self, language: str = "english", version: int = ANALYZER_VERSION) -> None:
        if version not in ANALYZER_VERSIONS:
            raise ValueError(f"unknown analyzer version {version} (this kbctl knows {ANALYZER_VERSIONS})")
        self.language = language
        self.version = version
        self.versions: tuple[int, ...] = (version,)  # the versions whose terms it gives (a union's: several)
        self.stopwords = ENGLISH_STOPWORDS if language == "english" else frozenset()
        self._stem = None
        if language != "none":
            import Stemmer

            self._stem = Stemmer.Stemmer(language).stemWord

    def words(self, text: str) -> list[str]:
        """The words of ``text``, lower-cased, stopwords dropped, in order with repeats (unstemmed);
        a CJK run's words are its bigrams (version 2)."""
        if self.version < 2 or not _NEEDS_CJK.search(text):
            return [w for w in _WORD.findall(text.lower()) if w not in self.stopwords]
        return [w for w, _ in self._split(_fold(text))]

    def _split(self, text: str) -> Iterator[tuple[str, bool]]:
        """(word, whether it is CJK) of folded ``text``, stopwords dropped (version 2)."""
        stopwords = self.stopwords
        for m in _WORD2.finditer(text.lower()):
            run = m.group(1)
            if run:
                for b in _bigrams(run):
                    yield b, True
            elif m.group(0) not in stopwords:
                yield m.group(0), False

    def stem(self, word: str) -> str:
        """``word``'s Snowball stem (itself for language ``none``, and for a CJK word)."""
        return self._stem(word) if self._stem and not (self.version >= 2 and has_cjk(word)) else word

    def terms(self, text: str) -> list[str]:
        """Index terms of ``text`` in order, with repeats."""
        stem = self._stem  # inline (no method call per word): this runs over every chunk at ingest
        idents = _IDENT
        if self.version < 2 or not _NEEDS_CJK.search(text):  # version 1's words (one scan for CJK, not two)
            words = [w for w in _WORD.findall(text.lower()) if w not in self.stopwords]
            out = [stem(w) for w in words] if stem else words
        else:
            text = _fold(text)
            out = [w if cjk or not stem else stem(w) for w, cjk in self._split(text)]
            idents = _IDENT2
        for m in idents.finditer(text):
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


@lru_cache(maxsize=16)
def get_analyzer(language: str = "english", version: int = ANALYZER_VERSION) -> Analyzer:
    """A cached analyzer for a language (Snowball stemmer names: english, french, german…) at an
    analyzer version (a namespace's recorded one; the current one for a new namespace)."""
    return Analyzer(language, version)


class _Union(Analyzer):
    """The query analyzer of namespaces indexed at several versions: each term of any of them, as
    often as the one that repeats it most (text without CJK: the same terms as each)."""

    def __init__(self, language: str, versions: tuple[int, ...]) -> None:
        super().__init__(language, max(versions))
        self.versions = tuple(sorted(versions))
        self.parts = tuple(get_analyzer(language, v) for v in sorted(versions, reverse=True))

    def terms(self, text: str) -> list[str]:
        out: list[str] = []
        seen: Counter[str] = Counter()
        for a in self.parts:
            for t, n in Counter(a.terms(text)).items():
                if n > seen[t]:
                    out.extend([t] * (n - seen[t]))
                    seen[t] = n
        return out


def query_analyzer(language: str, versions: Iterable[int]) -> Analyzer:
    """The analyzer of a query over namespaces indexed at ``versions`` (one search may read
    namespaces made before and after a version change): that version's, or their union's."""
    vs = tuple(sorted(set(versions))) or (ANALYZER_VERSION,)
    return get_analyzer(language, vs[0]) if len(vs) == 1 else _union(language, vs)


@lru_cache(maxsize=8)
def _union(language: str, versions: tuple[int, ...]) -> Analyzer:
    return _Union(language, versions)
