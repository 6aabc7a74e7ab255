"""A fenced code block longer than a chunk, cut on its own between lines, every piece a fenced
block (``_code_pieces``); a line longer than a piece cut where a name ends (``_code_windows``)."""

from __future__ import annotations

import re
from typing import Iterator

from ..embed.tokens import Tokenizer
from ..types import Block
from .sentences import _inside_name, _name_edge, _windows
from .units import _count_within, _pack, _prose_pieces, _Unit

#: A fenced code block's opening: its fence (three or more backticks or tildes) and info string.
_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})[^\n]*")


def _fence(text: str) -> tuple[str, str] | None:
    """``(opening line, fence)`` of a block that is a fenced code block (it starts with three or more
    backticks or tildes, as ``kbctl.extract.text`` keeps one: whole, fences included), else ``None``."""
    if not text.startswith(("```", "~~~")):
        return None
    m = _FENCE_OPEN.match(text)
    return (m.group(0), m.group(1)) if m else None


def _closing_start(text: str, start: int, end: int, fence: str) -> int:
    """Where the line that closes a code block (``text[start:end]``, opened by ``fence``) starts;
    ``end`` when it is not closed (the document ended inside it)."""
    last = text.rfind("\n", start, end) + 1
    line = text[last:end].strip()
    if last > start and line.startswith(fence) and not line.strip(fence[0]):
        return last
    return end


def _code_pieces(block: Block, text, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, str]]:
    """A fenced code block cut between lines into pieces of at most ``limit`` tokens, each a fenced
    block of its own: a piece after the first opens with the block's opening line (its info string,
    the language, too), a piece before the last (or of a block left open) ends with its fence, so no
    piece reads as prose. A line longer than a piece is cut between names (``_code_windows``)."""
    opening, fence = _fence(block.text) or ("", "")
    room = limit - tok.count(opening) - tok.count(fence) - 2
    if room < limit // 2:  # an opening line too long to repeat: cut the block like any paragraph
        yield from _prose_pieces(text.units(block, limit, tok), text, limit, 0)
        return
    end = block.start + len(block.text)
    closed = _closing_start(block.text, 0, len(block.text), fence) < len(block.text)
    for s, e in _pack(text.units(block, room, tok, _line_units), room, 0):
        head = "" if s == block.start else f"{opening}\n"
        tail = "" if e == end and closed else f"\n{fence}"
        yield s, e, f"{head}{text.span(s, e)}{tail}"


def _line_units(text: str, block: Block, limit: int, tok: Tokenizer) -> Iterator[_Unit]:
    """A code block's lines as units, its opening fence line joined to the first line and its
    closing one to the last (a line longer than ``limit`` is cut by ``_code_windows``)."""
    start, end = block.start, block.start + len(block.text)
    fence = (_fence(block.text) or ("", "```"))[1]
    tail = _closing_start(text, start, end, fence)
    head_end = text.find("\n", start, end)
    unit_start, pos, first = start, (end if head_end < 0 else head_end + 1), True
    while unit_start < end:
        stop = text.find("\n", pos, end)
        if stop < 0 or stop + 1 >= tail:  # the last line takes the closing fence with it
            stop = end
        n = _count_within(tok, text[unit_start:stop], limit)
        if n is not None:
            yield _Unit(unit_start, stop, n, first)
        else:
            for ws, we, wm in _code_windows(text, unit_start, stop, limit, tok):
                yield _Unit(ws, we, wm, first)
                first = False
        unit_start, pos, first = stop + 1, stop + 1, False


def _code_windows(text: str, start: int, end: int, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, int]]:
    """Windows of a line of code of at most ``limit`` tokens that end between names: a window of
    ``_windows`` that ends inside a name (letters, digits, ``_``) is cut back to its last space, else
    to the last edge of a name, in its second half; a name longer than that is cut at token boundaries."""
    pos = start
    while pos < end:
        w = next(_windows(text, pos, end, limit, tok), None)
        if w is None:
            return
        ws, we, n = w
        if we < end and _inside_name(text, we):
            cut = _name_edge(text, ws + (we - ws) // 2, we)
            if cut is not None:
                m = tok.count(text[ws:cut])
                if m <= limit:
                    we, n = cut, m
        yield ws, we, n
        pos = we
