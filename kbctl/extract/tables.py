"""Tables as Markdown tables: one renderer for every extractor that finds tables (PDF, office).

A table becomes one block of GitHub-flavoured Markdown: a header row, the ``| --- |`` separator,
then one line per row. Cells keep all their text: line breaks inside a cell become spaces and
``|`` is escaped, so a row is always one line (the chunker splits a long table between rows and
repeats the header on every piece: ``kbctl.chunk``). Rows are padded to the widest row; empty
rows and columns are dropped. ``table_header`` tells whether a block is such a table and gives
its header lines; ``table_start`` also finds a table as people write them in Markdown (under a
caption line, or without the outer bars).
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any, Iterable, Sequence

__all__ = ["markdown_table", "table_header", "table_start", "is_caption", "tidy_table"]

_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_CELL_BAR = re.compile(r"(?<!\\)\|")
_CAPTION = re.compile(r"^(?:table|tab\.|tabelle|tableau|tabla)\s*[\dIVXivx]+[\s.:—–-]", re.I)


def markdown_table(rows: Iterable[Sequence[Any]], *, header: bool = True) -> str:
    """``rows`` (the first is the header when ``header``) as a Markdown table; ``""`` when empty.

    Without a header row (``header=False``), the columns are named ``Column 1``… so that the table
    is still valid Markdown and every piece of it shows which column a value is in.
    """
    grid = [[_cell(c) for c in row] for row in rows]
    grid = [row for row in grid if any(row)]
    if not grid:
        return ""
    width = max(len(r) for r in grid)
    grid = [r + [""] * (width - len(r)) for r in grid]
    keep = [j for j in range(width) if any(r[j] for r in grid)]
    grid = [[r[j] for j in keep] for r in grid]
    if not keep:
        return ""
    head = grid[0] if header else [f"Column {j + 1}" for j in range(len(keep))]
    body = grid[1:] if header else grid
    head = [h or f"Column {j + 1}" for j, h in enumerate(head)]
    lines = [_line(head), _line(["---"] * len(head)), *(_line(r) for r in body)]
    return "\n".join(lines)


def table_header(text: str) -> str | None:
    """The header lines (header row and separator) of a block that is a Markdown table, else ``None``."""
    if not text.startswith("|"):
        return None
    first = text.find("\n")
    if first < 0:
        return None
    second = text.find("\n", first + 1)
    sep = text[first + 1 : second if second >= 0 else len(text)]
    if not _SEPARATOR.match(sep):
        return None
    return text[: second if second >= 0 else len(text)]


def table_start(text: str) -> tuple[int, str] | None:
    """Where a block's Markdown table starts and its header lines, ``(offset, header)``, else ``None``:
    a ``table_header`` table (at 0), or, as GitHub reads them, one whose rows are written without
    the outer bars (``City | Land`` over ``--- | ---``) or that is under up to two lines of text of
    the same block (a caption: ``Table 1: Cities``). The header row and the rule have as many cells,
    the rule at least one ``|`` (so a Setext heading's ``---`` is no table)."""
    head = table_header(text)
    if head is not None:
        return 0, head
    starts = [0]  # of the first four lines: the header row is one of the first three
    while len(starts) < 4 and (nl := text.find("\n", starts[-1])) >= 0:
        starts.append(nl + 1)
    for row_start, rule_start in pairwise(starts):
        rule_end = text.find("\n", rule_start)
        rule = text[rule_start : rule_end if rule_end >= 0 else len(text)]
        row = text[row_start : rule_start - 1]
        if "|" in rule and "|" in row and _SEPARATOR.match(rule) and _cell_count(row) == _cell_count(rule):
            return row_start, text[row_start : rule_start + len(rule)]
    return None


def _cell_count(line: str) -> int:
    """The cells of a table's line: its ``|`` not escaped, less the outer bars."""
    line = line.strip()
    bars = len(_CELL_BAR.findall(line))
    return bars + 1 - line.startswith("|") - (len(line) > 1 and line.endswith("|") and not line.endswith("\\|"))


def tidy_table(text: str) -> tuple[str | None, str]:
    """A Markdown table as another converter wrote it (trafilatura), made to read like ours: the
    caption it writes as a first one-cell row (with a rule under it) taken out and returned, so the
    header row is the column names; trailing spaces dropped. ``(None, text)`` when there is nothing to do."""
    lines = [ln.rstrip() for ln in text.split("\n")]
    caption = None
    if len(lines) >= 4 and _SEPARATOR.match(lines[1]) and _SEPARATOR.match(lines[3]):
        cells = [c.strip() for c in lines[0].strip().strip("|").split("|")]
        if cells and cells[0] and not any(cells[1:]):
            caption, lines = cells[0], lines[2:]
    return caption, "\n".join(lines)


def is_caption(text: str) -> bool:
    """Whether a one-line paragraph reads as a table caption ("Table 3: Population by city")."""
    return "\n" not in text.strip() and len(text) < 200 and bool(_CAPTION.match(text.strip()))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
