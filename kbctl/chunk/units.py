"""What the chunker packs: a unit (a paragraph, a sentence, a window of one, a table's row, a line of
code, with its tokens), how units are packed greedily into pieces of at most a limit with a
sentence overlap (``_pack``), and how a text is measured without being tokenized whole
(``_count_within``). The other modules of ``kbctl.chunk`` build on it; it imports none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from ..embed.tokens import Tokenizer

# A token is rarely longer than this many characters: a block longer than ``limit`` times this is
# measured on a prefix, and token windows are cut from pieces this many times ``limit`` long, so a
# huge paragraph is never tokenized whole (which holds every token's string and offsets at once).
_CHARS_PER_TOKEN = 16


@dataclass(frozen=True)
class _Unit:
    start: int  # offsets in Document.text
    end: int
    tokens: int
    paragraph_start: bool
    continues: bool = False  # goes on a line cut mid-line: a piece it opens starts with CUT_MARK


#: What opens a piece that goes on a line of prose cut mid-line (a sentence longer than a chunk).
CUT_MARK = "…"


def _prose_pieces(units: Iterable[_Unit], text, limit: int, overlap: int) -> Iterator[tuple[int, int, str]]:
    """``units`` packed to ``limit`` tokens with ``overlap``; a piece that opens with a unit going on
    a line cut mid-line (``_line_windows``) starts with ``CUT_MARK``."""
    marked: set[int] = set()  # where such a unit starts
    for s, e in _pack(_noting(units, marked), limit, overlap):
        yield s, e, (CUT_MARK if s in marked else "") + text.span(s, e)


def _noting(units: Iterable[_Unit], marked: set[int]) -> Iterator[_Unit]:
    """``units``, the start of each that goes on a line cut mid-line added to ``marked`` as it passes."""
    for u in units:
        if u.continues:
            marked.add(u.start)
        yield u


def _count_within(tok: Tokenizer, text: str, limit: int) -> int | None:
    """``tok.count(text)`` when it is at most ``limit``, else ``None``; a long text is first measured
    on a prefix cut at whitespace (tokenizers split at whitespace, so the prefix has no more tokens)."""
    cap = limit * _CHARS_PER_TOKEN
    if len(text) > cap:
        cut = max(text.rfind(" ", 0, cap), text.rfind("\n", 0, cap))
        if cut > 0 and tok.count(text[:cut]) > limit:
            return None
    n = tok.count(text)
    return n if n <= limit else None


def _pack(units: Iterable[_Unit], limit: int, overlap: int) -> Iterator[tuple[int, int]]:
    """Greedy packing of units into spans of at most ``limit`` tokens, with sentence overlap."""
    cur: list[_Unit] = []
    total = 0
    for u in units:
        if cur and total + u.tokens > limit:
            yield cur[0].start, cur[-1].end
            cur, total = _tail(cur, overlap, limit - u.tokens)
        cur.append(u)
        total += u.tokens
    if cur:
        yield cur[0].start, cur[-1].end


def _tail(units: list[_Unit], overlap: int, room: int) -> tuple[list[_Unit], int]:
    """The trailing units (whole sentences) that fit in the overlap and leave room for the next."""
    keep: list[_Unit] = []
    total = 0
    for u in reversed(units):
        if u.paragraph_start and keep == [] and u is units[-1] and u.tokens > overlap:
            break
        if total + u.tokens > min(overlap, room):
            break
        keep.insert(0, u)
        total += u.tokens
    # a paragraph boundary is a natural break: do not carry whole paragraphs across it
    if keep and keep[0].paragraph_start and len(keep) == len(units):
        return [], 0
    return keep, total
