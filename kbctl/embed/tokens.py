"""Tokenizers used to measure chunks in the profile's own tokens.

Each embedder plugin may give one (``tokenizer(profile)`` on its factory): for a sentence-transformers
model it is the model's fast tokenizer (``tokenizer.json``, ``HFTokenizer``), loaded with the
``tokenizers`` library alone: chunking does not need torch. Without one (the ``hash`` embedder's
profiles), chunks are measured in words and punctuation marks (``WordTokenizer``), a character of a
script written without spaces between words (Han, Kana, Hangul, Thai, Lao, Myanmar, Khmer) being a
token of its own, as the lexical analyzer's bigrams and the models' tokenizers count it.

What the word tokenizer counts is named by ``WORD_COUNT``, which is part of the hash of every source
a profile measured in words chunks (``chunk_count_revision``, ``kbctl.ingest.steps.source_hash``): a
change of it makes the next ingest chunk every such source again (a document whose chunks come out
the same is kept as it is stored), as a change of ``chunk.size`` does. A model's tokenizer is named
by the profile's pin already.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Protocol

from ..config import Profile
from ..errors import KbctlError

#: What ``WordTokenizer`` counts: "words-2", a character of an unspaced script is a token (session 41).
#: Before, unnamed (no revision in a source's hash), a run of them between two punctuation marks was one.
WORD_COUNT = "words-2"


def _marks(*blocks: tuple[int, int]) -> str:
    return "".join(chr(c) for lo, hi in blocks for c in range(lo, hi + 1) if unicodedata.category(chr(c))[0] == "M")


# Han (with 々〆〇〻, the compatibility ideographs and extensions B to H), Kana, Hangul syllables and
# jamo (the ranges of ``kbctl.textutil.analyze``), then Thai, Lao, Myanmar and Khmer.
_UNSPACED = (
    "\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7fb\uf900-\ufaff"
    "\U00020000-\U000323af\u0e01-\u0e5b\u0e81-\u0edf\u1000-\u109f\u1780-\u17f9"
)
# What belongs to the character before it: the vowel and tone marks of Thai, Lao, Myanmar and Khmer,
# kana's combining (semi-)voiced marks (text in NFD), the vowels and final consonants of a Hangul
# syllable written as jamo, variation selectors.
_FOLLOWERS = (
    _marks((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))
    + "\u3099\u309a\u1160-\u11ff\ud7b0-\ud7fb\ufe00-\ufe0f\U000e0100-\U000e01ef"
)
# A character of an unspaced script with what follows it, a run of other word characters, a mark.
_TOKEN = re.compile(f"[{_UNSPACED}][{_FOLLOWERS}]*|[^\\W{_UNSPACED}]+|[^\\w\\s]")


class Tokenizer(Protocol):
    """Counts tokens and gives each token's character span."""

    special_tokens: int

    def count(self, text: str) -> int: ...

    def spans(self, text: str) -> list[tuple[int, int]]: ...


class WordTokenizer:
    """Words, punctuation marks and characters of unspaced scripts (``WORD_COUNT``). Text without a
    character of an unspaced script is cut exactly as ``\\w+|[^\\w\\s]`` cuts it."""

    special_tokens = 0

    def count(self, text: str) -> int:
        return sum(1 for _ in _TOKEN.finditer(text))  # a long unspaced text: no list of its tokens

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _TOKEN.finditer(text)]


class HFTokenizer:
    """A Hugging Face fast tokenizer from a model directory's ``tokenizer.json``."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as _Tok

        self._tok = _Tok.from_file(str(path))
        self._tok.no_truncation()
        self._tok.no_padding()
        self.special_tokens = len(self._tok.encode("").ids)  # [CLS] and [SEP] for BERT models
        self._fast = getattr(self._tok, "encode_batch_fast", None)

    def count(self, text: str) -> int:
        # The batch form without offsets: a quarter less CPU than ``encode`` on SciFact's sentences,
        # the same counts, and the GIL released meanwhile (the model's thread runs); older
        # tokenizers (< 0.20.2) lack it.
        if self._fast is None:
            return len(self._tok.encode(text, add_special_tokens=False))
        return len(self._fast([text], add_special_tokens=False)[0])

    def spans(self, text: str) -> list[tuple[int, int]]:
        return list(self._tok.encode(text, add_special_tokens=False).offsets)


_TOKENIZERS: dict[tuple[str, str, bool], Tokenizer] = {}


def get_tokenizer(profile: Profile) -> Tokenizer:
    """The tokenizer that measures chunks for this profile: its embedder plugin's ``tokenizer``,
    else words and punctuation marks. Made once per embedder and model."""
    key = (profile.embedder, profile.model, profile.allow_download)
    if key not in _TOKENIZERS:
        from .protocol import load_factory

        make = getattr(load_factory(profile.embedder), "tokenizer", None)
        _TOKENIZERS[key] = make(profile) if make is not None else WordTokenizer()
    return _TOKENIZERS[key]


def chunk_count_revision(profile: Profile) -> str:
    """``WORD_COUNT`` when the profile's chunks are measured by the word tokenizer (its embedder
    plugin gives no tokenizer of its own), else ``""``: what a source's hash records of the count
    (a model's tokenizer is named by the pin). Nothing is loaded but the plugin's module; a plugin
    that cannot load chunks nothing here (``""``: the records it stores were chunked elsewhere)."""
    from .protocol import load_factory

    try:
        factory = load_factory(profile.embedder)
    except KbctlError:
        return ""
    return WORD_COUNT if getattr(factory, "tokenizer", None) is None else ""
