"""The ``structure`` strategy (the default): a document's sections (heading path and page) packed to
``chunk.size`` tokens (``_fixed``), a table or a long code block cut on its own, from a text held
whole (``_WholeText``) or read in windows (``_WindowText``); and a chunk's header (``_header``)."""

from __future__ import annotations

from collections import deque
from itertools import chain, groupby
from typing import Callable, Iterable, Iterator

from ..config import Profile
from ..embed.tokens import Tokenizer
from ..extract.tables import table_start
from ..types import Block, Chunk
from .code import _code_pieces, _fence
from .sentences import _units
from .tables import _table_pieces
from .units import _count_within, _prose_pieces, _Unit


class _WholeText:
    """The text of a document held whole: units are cut from it with offsets into it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def units(self, block: Block, limit: int, tok: Tokenizer, cut=None) -> Iterator[_Unit]:
        return (cut or _units)(self.text, block, limit, tok)

    def span(self, start: int, end: int) -> str:
        return self.text[start:end]

    def release(self, before: int) -> None:
        pass


class _WindowText:
    """The blocks a chunk may still span, of a document whose text is ``"\n\n".join`` of its blocks."""

    def __init__(self) -> None:
        self.blocks: deque[Block] = deque()

    def units(self, block: Block, limit: int, tok: Tokenizer, cut=None) -> Iterator[_Unit]:
        self.blocks.append(block)
        for u in (cut or _units)(block.text, Block(block.text), limit, tok):
            yield _Unit(block.start + u.start, block.start + u.end, u.tokens, u.paragraph_start, u.continues)

    def span(self, start: int, end: int) -> str:
        parts, pos = [], start
        for b in self.blocks:
            b_end = b.start + len(b.text)
            if b_end <= start:
                continue
            if b.start >= end:
                break
            if b.start > pos:
                parts.append("\n" * (b.start - pos))  # the blank line between two blocks
                pos = b.start
            parts.append(b.text[pos - b.start : min(end, b_end) - b.start])
            pos = min(end, b_end)
        return "".join(parts)

    def release(self, before: int) -> None:
        """Forget the blocks that end before ``before``: no later chunk starts before it."""
        while self.blocks and self.blocks[0].start + len(self.blocks[0].text) <= before:
            self.blocks.popleft()


def _fixed(uri: str, title: str, blocks: Iterable[Block], text, profile: Profile, tok: Tokenizer) -> Iterator[Chunk]:
    """Chunks of ``blocks`` packed to ``chunk.size`` tokens, section by section (``text``: a
    ``_WholeText`` or a ``_WindowText``, which cuts units from blocks and gives a span's text).
    A Markdown table is a section of its own, cut between rows, its header repeated on every piece."""
    size = profile.chunk.size
    overlap = profile.chunk.overlap
    position = 0
    for (heading, page, table), group in groupby(blocks, key=_section_key):
        section = iter(group)
        header = _header(title, heading)
        budget = profile.max_tokens - tok.special_tokens - (tok.count(header) + 2 if header else 0)
        if budget < 8:  # an absurdly long title: drop the header rather than the text
            header, budget = "", profile.max_tokens - tok.special_tokens
        limit = min(size, budget)
        first = next(section)
        placed = [first, *section] if first.boxes else None  # a PDF's: held to place chunks on the page
        if table is not None:
            pieces = _table_pieces(first, text, limit, tok)
        else:
            section = iter(placed) if placed else chain([first], section)
            pieces = _prose_and_code(section, text, limit, min(overlap, limit // 2), tok)
        for start, end, chunk_text in pieces:
            yield Chunk(
                document_uri=uri,
                position=position,
                text=chunk_text,
                token_count=tok.count(chunk_text),
                char_start=start,
                char_end=end,
                heading_path=heading,
                page=page,
                header=header,
                boxes=_boxes(placed, start, end) if placed else (),
            )
            position += 1
            text.release(start)


def _boxes(blocks: list[Block], start: int, end: int) -> tuple[tuple[float, ...], ...]:
    """The ``(page, x0, top, x1, bottom)`` of every line of ``blocks`` the span ``start:end`` touches."""
    out = []
    for b in blocks:
        if b.start >= end or b.start + len(b.text) <= start:
            continue
        for offset, length, *box in b.boxes:
            if b.start + offset < end and b.start + offset + length > start:
                out.append((b.page or 0, *box))
    return tuple(out)


def _section_key(b: Block) -> tuple[tuple[str, ...], int | None, int | None]:
    """Blocks group by heading path and page; a table block (keyed by its start) stands alone."""
    return b.heading_path, b.page, (b.start if table_start(b.text) else None)


def _prose_and_code(
    blocks: Iterable[Block], text, limit: int, overlap: int, tok: Tokenizer
) -> Iterator[tuple[int, int, str]]:
    """A section's blocks packed to ``limit`` tokens with ``overlap``, but for a fenced code block
    too long for one chunk: that one is cut on its own, between lines (``_code_pieces``)."""
    counted: dict[int, int] = {}  # a short code block's tokens, by its start: counted once
    for is_long, run in groupby(blocks, key=_longer_than(limit, tok, counted, code=True)):
        if is_long:
            for b in run:
                yield from _code_pieces(b, text, limit, tok)
        else:
            units = (u for b in run for u in text.units(b, limit, tok, _counted_cut(counted.pop(b.start, None))))
            yield from _prose_pieces(units, text, limit, overlap)


def _longer_than(limit: int, tok: Tokenizer, counted: dict[int, int], code: bool) -> Callable[[Block], bool]:
    """Whether a block is a fenced code block (``code``; else a code block or a Markdown table)
    longer than ``limit`` tokens, to be cut on its own; one that fits leaves its count in
    ``counted`` (by its start), so its unit is not counted again (``_counted_cut``)."""

    def longer(b: Block) -> bool:
        if not (_fence(b.text) is not None if code else _is_code_or_table(b.text)):
            return False
        n = _count_within(tok, b.text, limit)
        if n is not None:
            counted[b.start] = n
        return n is None

    return longer


def _counted_cut(n: int | None):
    """The units of a block already counted whole (``n`` tokens, within the limit): itself, one
    unit, not counted again; ``None`` (the default cut) for a block not counted yet."""
    if n is None:
        return None
    return lambda text, block, limit, tok: iter([_Unit(block.start, block.start + len(block.text), n, True)])


def _is_code_or_table(block_text: str) -> bool:
    return _fence(block_text) is not None or table_start(block_text) is not None


def _header(title: str, heading: tuple[str, ...]) -> str:
    parts = [p for p in (title, *heading) if p]
    # the first heading is often the title again
    if len(parts) > 1 and parts[0].strip().lower() == parts[1].strip().lower():
        parts = parts[1:]
    return " > ".join(parts)
