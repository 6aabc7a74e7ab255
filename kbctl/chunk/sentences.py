"""Prose cut into sentences, and a sentence longer than a chunk into token windows: the sentence
ends (``.!?`` before a space, the unspaced stops of Chinese and Japanese, an ASCII ``?``/``!``
between CJK characters), windows cut back to a line end or a word's edge (``_line_windows``), and
the token windows every longer cut starts from (``_windows``)."""

from __future__ import annotations

import re
from typing import Iterator

from ..embed.tokens import Tokenizer
from ..types import Block
from .units import _CHARS_PER_TOKEN, CUT_MARK, _count_within, _Unit

#: The full stops of Chinese and Japanese (the ideographic full stop U+3002 and its halfwidth form
#: U+FF61, the fullwidth exclamation and question marks and full stop U+FF01, U+FF1F, U+FF0E):
#: written with no space after them, they end a sentence wherever they are not followed by another
#: stop, a closing bracket or quote (the mark belongs to a quotation, and the sentence goes on after
#: it) or a digit (a fullwidth decimal point).
UNSPACED_STOPS = "。｡！？．"


#: Han (with 々〆〇〻, the compatibility ideographs and extensions B to H), Hiragana, Katakana,
#: Hangul syllables and jamo: the ranges of ``kbctl.textutil.analyze``.
CJK_LETTERS = (
    "\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7fb\uf900-\ufaff"
    "\U00020000-\U000323af"
)


#: An ASCII ``?`` or ``!`` (up to three) written between CJK characters, a space after it or not
#: (``本当?次の文``): a sentence ends after it (session 43). A CJK character on both sides, so
#: English, URLs (``a?b``) and a name such as ``Yahoo!ニュース`` are read as before.
#: The first look-behind, one character, is cheap and fails at almost every position of English
#: text before the three that need a CJK letter are tried (English splits 1.6x faster than without).
_ASCII_MARK_IN_CJK = f"(?<=[!?])(?:(?<=[{CJK_LETTERS}][!?])|(?<=[{CJK_LETTERS}][!?]{{2}})|(?<=[{CJK_LETTERS}][!?]{{3}}))\\s*(?=[{CJK_LETTERS}])"


_SENTENCE_END = re.compile(
    r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n(?=\s*[-*•]\s)|\n{2,}"
    rf"|(?<=[{UNSPACED_STOPS}])(?![{UNSPACED_STOPS}」』）〕】〉》”’\"')\]0-9０-９])\s*"
    f"|{_ASCII_MARK_IN_CJK}"
)


_NAME_CHAR = re.compile(r"\w")


def _inside_name(text: str, i: int) -> bool:
    return _NAME_CHAR.match(text, i - 1) is not None and _NAME_CHAR.match(text, i) is not None


def _name_edge(text: str, lo: int, hi: int) -> int | None:
    """The last place in ``text[lo:hi]`` not inside a name: the end of the text before a space, else
    between a name's character and another; ``None`` when there is none."""
    space = max(text.rfind(" ", lo, hi), text.rfind("\t", lo, hi))
    if space > lo:
        end = space
        while end > lo and text[end - 1] in " \t":
            end -= 1
        if end > lo:
            return end
    for i in range(hi - 1, lo, -1):
        if not _inside_name(text, i):
            return i
    return None


def _units(text: str, block: Block, limit: int, tok: Tokenizer) -> Iterator[_Unit]:
    """A block as one unit if it fits, else its sentences, else token windows."""
    start, end = block.start, block.start + len(block.text)
    n = _count_within(tok, block.text, limit)
    if n is not None:
        yield _Unit(start, end, n, True)
        return
    first = True
    for s, e in _sentences(text, start, end):
        m = _count_within(tok, text[s:e], limit) if e - s <= limit * _CHARS_PER_TOKEN else None
        if m is not None:
            yield _Unit(s, e, m, first)
        else:
            for ws, we, wm, goes_on in _line_windows(text, s, e, limit, tok):
                yield _Unit(ws, we, wm, first, goes_on)
                first = False
        first = False


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans inside ``text[start:end]`` (offsets into ``text``), whitespace trimmed."""
    return list(_sentences(text, start, end))


def _sentences(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """``split_sentences`` one span at a time."""
    end = len(text) if end is None else end
    pos = start
    for m in _SENTENCE_END.finditer(text, start, end):
        yield from _trimmed(text, pos, m.start())
        pos = m.end()
    yield from _trimmed(text, pos, end)


def _trimmed(text: str, s: int, e: int) -> Iterator[tuple[int, int]]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if e > s:
        yield s, e


def _line_windows(text: str, start: int, end: int, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, int, bool]]:
    """Windows of a sentence of prose longer than ``limit`` tokens (a line with no sentence end:
    a list of names), ``(start, end, tokens, goes_on)``: a window is cut back to the last line end
    in its second half, else, when it ends inside a word, to the last space or a name's edge there
    (``_name_edge``), never back to a list's ``,`` (docs/hardening.md, "Chunker leftovers"); only a word longer
    than half a window is cut at token boundaries. A window after one cut mid-line goes on that
    line (``goes_on``): its piece opens with ``CUT_MARK``, so it leaves room for it, and its tokens
    are counted with it; one after a line end starts a line, unmarked, as a code block's piece does."""
    mark = tok.count(CUT_MARK) + 1  # and one for a tokenizer that reads the word after it otherwise
    pos, goes_on = start, False
    while pos < end:
        room = limit - mark if goes_on else limit
        w = next(_windows(text, pos, end, room, tok), None)
        if w is None:
            return
        ws, we, n = w
        at_line_end = text.startswith("\n", we)
        if we < end and not at_line_end:
            half = ws + (we - ws) // 2
            line_end = text.rfind("\n", half, we)
            cut: int | None
            if line_end > ws:
                cut, at_line_end = line_end, True
            else:
                cut = _name_edge(text, half, we) if _inside_name(text, we) else None
            if cut is not None and cut > ws:
                m = tok.count(text[ws:cut])
                if m <= room:
                    we, n = cut, m
                else:
                    at_line_end = False
        yield ws, we, (n if not goes_on else tok.count(CUT_MARK + text[ws:we])), goes_on
        pos, goes_on = we, not at_line_end


def _windows(text: str, start: int, end: int, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, int]]:
    """Consecutive windows of ``text[start:end]`` of at most ``limit`` tokens, cut at token boundaries.

    The span is tokenized a stretch of ``limit * _CHARS_PER_TOKEN`` characters at a time (cut at
    whitespace when there is some); the tokens after the stretch's last full window start the next.
    """
    pos, stretch = start, limit * _CHARS_PER_TOKEN
    while pos < end:
        stop = end if end - pos <= stretch else _cut(text, pos, pos + stretch)
        spans = tok.spans(text[pos:stop])
        if not spans:
            break
        whole = len(spans) if stop == end or len(spans) <= limit else len(spans) // limit * limit
        for i in range(0, whole, limit):
            w = spans[i : min(i + limit, whole)]
            yield pos + w[0][0], pos + w[-1][1], len(w)
        pos = stop if whole == len(spans) else pos + spans[whole][0]


def _cut(text: str, start: int, stop: int) -> int:
    """Where to end a stretch: the last whitespace before ``stop`` (else ``stop``)."""
    cut = max(text.rfind(" ", start, stop), text.rfind("\n", start, stop))
    return cut if cut > start else stop
