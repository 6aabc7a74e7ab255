"""A Markdown table cut between rows, every piece after the first under the table's header (and its
caption marked continued), a header too long to repeat cut at a cell edge or replaced by a line
naming the table (``_table_pieces``); a row longer than a piece cut between cells, else between
words (``_row_windows``)."""

from __future__ import annotations

import re
from typing import Iterator

from ..embed.tokens import Tokenizer
from ..extract.tables import table_start
from ..types import Block
from .sentences import _inside_name, _name_edge, _windows
from .units import CUT_MARK, _count_within, _noting, _pack, _Unit


def _table_pieces(block: Block, text, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, str]]:
    """A Markdown table cut between rows into pieces of at most ``limit`` tokens, each piece after
    the first preceded by the table's header lines (so it reads alone), and by its caption marked
    ``(continued)`` when it is under one; a header too long to repeat in full by what of it fits, or
    a line naming the table (``_table_head``). A row longer than a piece is cut between cells, else
    between words (``_row_windows``), its pieces after the first opening, under the header, with
    ``CUT_MARK``. With its span in the text."""
    offset, head = table_start(block.text) or (0, "")
    head, room = _table_head(block.text[:offset].rstrip(), head, limit, tok)
    marked: set[int] = set()  # where a unit going on a row cut mid-row starts
    for s, e in _pack(_noting(text.units(block, room, tok, _row_cut(limit)), marked), room, 0):
        body = (CUT_MARK if s in marked else "") + text.span(s, e)
        yield s, e, (body if s == block.start or not head else f"{head}\n{body}")


#: What follows a table's caption repeated over a piece after the first.
CONTINUED = " (continued)"


#: What opens a table's piece after the first when not even its first column's name fits in half a
#: piece and it has no caption (or one too long): a line naming it, so no piece is a run of cells.
TABLE_CONTINUED = "Table (continued)"


#: The last cell of a header cut at a cell edge (``_cut_head``): the columns it does not name.
_MORE_COLUMNS = "…"


_CELL_BAR = re.compile(r"(?<!\\)\|")


def _table_head(caption: str, head: str, limit: int, tok: Tokenizer) -> tuple[str, int]:
    """What opens a table's piece after the first, and the tokens left for its rows (at least half a
    piece): the header lines under the caption marked continued (``_continued_head``); a header too
    long for that cut at a cell edge, its first columns and a last one ``…`` (``_cut_head``), under
    the caption marked continued when one column fits with it too; when not even one column fits,
    a line naming the table (its caption marked continued, else ``TABLE_CONTINUED``); nothing only
    in a piece too small for that line."""
    whole, room = _continued_head(caption, head, limit, tok)
    if room >= limit // 2:
        return whole, room
    for above in (f"{caption}{CONTINUED}\n", "") if caption else ("",):
        cut = _cut_head(above, head, limit, tok)
        if cut is not None:
            return cut, limit - tok.count(cut) - 1
    for name in (f"{caption}{CONTINUED}", TABLE_CONTINUED) if caption else (TABLE_CONTINUED,):
        room = limit - tok.count(name) - 1
        if room >= limit // 2:
            return name, room
    return "", limit


def _continued_head(caption: str, head: str, limit: int, tok: Tokenizer) -> tuple[str, int]:
    """What opens a table's piece after the first, and the tokens left for its rows: the caption
    lines above the table (``table_start``'s) with ``CONTINUED`` after them, then the header lines;
    the header alone when there is no caption or the caption would leave less than half a piece."""
    room = limit - tok.count(head) - 1
    if caption:
        marked = f"{caption}{CONTINUED}\n{head}"
        with_caption = limit - tok.count(marked) - 1
        if with_caption >= limit // 2:
            return marked, with_caption
    return head, room


def _cut_head(above: str, head: str, limit: int, tok: Tokenizer) -> str | None:
    """``above`` (the caption marked continued, or nothing) and a table's header lines (row and rule)
    cut after their first columns, as many as leave at least half a piece, with a last column ``…``
    for the others (``| A | B | … |`` over ``| --- | --- | --- |``; without outer bars when the
    table has none); ``None`` when not one fits."""
    row, _, rule = head.partition("\n")
    row_ends, rule_ends = _cell_ends(row), _cell_ends(rule)
    cells = min(len(row_ends), len(rule_ends))
    barred = row.lstrip().startswith("|")
    more = (_last_cell(row, _MORE_COLUMNS, barred), _last_cell(rule, "---", barred))

    def first(k: int) -> str:
        return f"{above}{row[: row_ends[k - 1]].rstrip()}{more[0]}\n{rule[: rule_ends[k - 1]].rstrip()}{more[1]}"

    best, lo, hi = None, 1, cells - 1  # at least one column named, at least one left to ``…``
    while lo <= hi:
        k = (lo + hi) // 2
        if limit - tok.count(first(k)) - 1 >= limit // 2:
            best, lo = first(k), k + 1
        else:
            hi = k - 1
    return best


def _last_cell(line: str, cell: str, barred: bool) -> str:
    """A last cell ``cell`` for a table's line cut after a cell, spaced as the line is (``| x |`` or ``|x|``)."""
    spaced = " |" in line.rstrip() or "| " in line
    bar = " | " if spaced else "|"
    return f"{bar}{cell}{bar.rstrip() if barred else ''}"


def _cell_ends(line: str) -> list[int]:
    """Where each cell of a table's line ends: at the ``|`` (not escaped) after it, the last at the
    closing bar or the end of the line."""
    bars = [m.start() for m in _CELL_BAR.finditer(line)]
    if bars and not line[: bars[0]].strip():
        bars = bars[1:]  # the opening bar
    if not bars or line[bars[-1] + 1 :].strip():
        bars.append(len(line.rstrip()))
    return bars


def _row_cut(first: int):
    """``_row_units`` with ``first``, the first piece's budget (the chunk's limit: it repeats no header)."""
    return lambda text, block, limit, tok: _row_units(text, block, limit, tok, first)


def _row_units(text: str, block: Block, limit: int, tok: Tokenizer, first_limit: int) -> Iterator[_Unit]:
    """A table block's rows as units of at most ``limit`` tokens, its header lines (and a caption line
    above them) joined to the first row, that unit up to ``first_limit``; a row longer than that cut
    between cells, else between words (``_row_windows``), the first row's first window after the header."""
    start, end = block.start, block.start + len(block.text)
    offset, head = table_start(block.text) or (0, "")
    body = start + offset + len(head)
    unit_start, first = start, True
    while body < end:
        stop = text.find("\n", body + 1, end)
        stop = end if stop < 0 else stop
        if text[body] == "\n":
            body += 1
        n = _count_within(tok, text[unit_start:stop], limit)
        if n is not None:
            yield _Unit(unit_start, stop, n, first)
        elif first:
            yield from _first_row_units(text, start, body, stop, limit, first_limit, tok)
        else:
            for ws, we, wm, goes_on in _row_windows(text, unit_start, stop, limit, limit, tok):
                yield _Unit(ws, we, wm, False, goes_on)
        unit_start, body, first = stop + 1, stop, False
    if first:  # a header without rows
        yield from _head_units(text, start, end, limit, first_limit, tok)


def _first_row_units(
    text: str, start: int, row: int, stop: int, limit: int, first_limit: int, tok: Tokenizer
) -> Iterator[_Unit]:
    """The units of a table's header lines (from ``start``) and its first row (``row:stop``) when they
    do not fit in ``limit`` together: one unit within ``first_limit`` (the first piece repeats no
    header); a row longer than a piece, after the header lines in the first window that leaves room
    for (8 tokens or more); else the header lines as one unit (their lines cut as rows are when they
    are longer than ``first_limit``) and the row after them, whole if it fits in ``limit``."""
    n = _count_within(tok, text[start:stop], first_limit)
    if n is not None:
        yield _Unit(start, stop, n, True)
        return
    whole = _count_within(tok, text[row:stop], limit)
    lead = _count_within(tok, text[start : row - 1], first_limit)
    fit = first_limit - (lead or first_limit) - 1
    if whole is None and fit >= 8:
        windows = _row_windows(text, row, stop, fit, limit, tok)
        _, we, _, _ = next(windows)
        yield _Unit(start, we, tok.count(text[start:we]), True)
        for ws, we, wm, goes_on in windows:
            yield _Unit(ws, we, wm, False, goes_on)
        return
    yield from _head_units(text, start, row - 1, limit, first_limit, tok, lead)
    if whole is not None:
        yield _Unit(row, stop, whole, False)
    else:
        for ws, we, wm, goes_on in _row_windows(text, row, stop, limit, limit, tok):
            yield _Unit(ws, we, wm, False, goes_on)


def _head_units(
    text: str, start: int, end: int, limit: int, first_limit: int, tok: Tokenizer, counted: int | None = None
) -> Iterator[_Unit]:
    """A table's header lines (and caption) ``text[start:end]`` as one unit within ``first_limit``
    (``counted``: its tokens, when known); else each line a unit of at most ``limit`` tokens, a longer
    one cut as a row is (``_row_windows``)."""
    n = counted if counted is not None else _count_within(tok, text[start:end], first_limit)
    if n is not None:
        yield _Unit(start, end, n, True)
        return
    pos = start
    while pos < end:
        line_end = text.find("\n", pos, end)
        line_end = end if line_end < 0 else line_end
        m = _count_within(tok, text[pos:line_end], limit)
        if m is not None:
            yield _Unit(pos, line_end, m, pos == start)
        else:
            for ws, we, wm, goes_on in _row_windows(text, pos, line_end, limit, limit, tok):
                yield _Unit(ws, we, wm, pos == start and not goes_on, goes_on)
        pos = line_end + 1


def _row_windows(
    text: str, start: int, end: int, first: int, limit: int, tok: Tokenizer
) -> Iterator[tuple[int, int, int, bool]]:
    """Windows of a table's row longer than a piece, ``(start, end, tokens, goes_on)``: the first of
    at most ``first`` tokens, the others of ``limit`` less ``CUT_MARK`` (each goes on the row: its
    piece opens with the mark, counted with it). A window is cut back to the last edge between two
    cells in its second half (before a ``|`` not escaped, the next window going on from that bar),
    else, when it ends inside a word, to the last space in its second half, else to the start of
    that word; only a word longer than a window is cut at token boundaries."""
    mark = tok.count(CUT_MARK) + 1  # and one for a tokenizer that reads the word after it otherwise
    pos, room, goes_on = start, first, False
    while pos < end:
        w = next(_windows(text, pos, end, room, tok), None)
        if w is None:
            return
        ws, we, n = w
        if we < end and not _at_cell_edge(text, we, end):
            half = ws + (we - ws) // 2
            cut = _cell_edge(text, half, we, end)
            if cut is None and _inside_name(text, we):
                cut = _name_edge(text, half, we) or _name_edge(text, ws, we)
            if cut is not None and cut > ws:
                m = tok.count(text[ws:cut])
                if m <= room:
                    we, n = cut, m
        yield ws, we, (tok.count(CUT_MARK + text[ws:we]) if goes_on else n), goes_on
        pos, room, goes_on = we, limit - mark, True


def _at_cell_edge(text: str, i: int, end: int) -> bool:
    """Whether ``text[i:end]`` (a row's rest) opens, after spaces, with a bar that is not the row's last."""
    j = i
    while j < end and text[j] in " \t":
        j += 1
    return j < end and text[j] == "|" and text[j - 1] != "\\" and bool(text[j + 1 : end].strip())


def _cell_edge(text: str, lo: int, hi: int, end: int) -> int | None:
    """The end (spaces left out) of the last cell in ``text[lo:hi]`` that a bar not escaped closes
    and another cell follows (not the row's closing bar), ``None`` when there is none."""
    for m in reversed(list(_CELL_BAR.finditer(text, lo, hi))):
        if not text[m.end() : end].strip():
            continue
        cut = m.start()
        while cut > lo and text[cut - 1] in " \t":
            cut -= 1
        return cut if cut > lo else None
    return None
