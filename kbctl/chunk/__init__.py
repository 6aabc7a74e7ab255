"""The chunk stage: split documents into pieces the model can read whole.

Structure first: a chunk never spans two sections (heading paths) or two PDF pages. Inside a
section, paragraphs are packed greedily up to ``chunk.size`` tokens of the profile's tokenizer; a
paragraph too long for one chunk is split into sentences, and a sentence too long into token
windows cut back to a line end in their second half, else, when a window ends inside a word, to
that word's start (a word longer than half a chunk at token boundaries); a piece that goes on a line cut mid-line opens with ``CUT_MARK`` (``…``). A sentence ends at ``.!?`` followed by a space, at a Chinese or Japanese full stop
(``UNSPACED_STOPS``) with no space needed, or at an ASCII ``?``/``!`` between CJK characters
(``本当?次``). The chunker's revision, ``SENTENCE_ENDS`` (where it cuts: sentence ends, code blocks,
tables; named for the sentence splitter, whose revisions came first), is part of every
source's hash (``kbctl.ingest.steps.source_hash``). Consecutive chunks of one section share up to ``chunk.overlap`` tokens of whole sentences.

A Markdown table (a block that starts with a header row and its ``| --- |`` rule, as the extractors
write tables, or as GitHub reads them: without the outer bars, or under a caption line of the same
block: ``kbctl.extract.tables.table_start``) is a section of its own, cut only between rows; every
piece after the first starts with the table's header lines, so it reads alone, and with its caption
lines marked ``(continued)`` when it is under one (``Table 3: Prices (continued)``). A header too
long to repeat (over half a piece) is repeated cut at a cell edge, its first columns and a last
column ``…`` (``| Plan | … |``), or, when not one column fits, as a line naming the table (its
caption marked continued, else ``Table (continued)``). A row longer than a piece is cut between
cells (the next piece going on from the bar), else between words, and a piece going on a row
opens, under the header, with ``CUT_MARK``.

A fenced code block (a block that opens with three or more backticks or tildes: the Markdown
extractor keeps one whole, fences included) that fits in a chunk is packed like any paragraph; a
longer one is cut on its own, only at line ends, and every piece is a fenced block: it opens with
the block's opening line (the info string, its language, too) and ends with its fence. A line
longer than a piece is cut where a name ends (a space, else the edge of a run of letters, digits
and ``_``), a name longer than half a piece at the tokenizer's token boundaries.

Every chunk is an exact span of its document's text (``char_start:char_end``), but for those
repeated header and caption lines (or what of them fits), fences and the ``…`` of a piece going
on a cut line or row, and carries its heading path, page, a content hash and, for a PDF, the
boxes of its lines on the page (``boxes``: one ``(page, x0, top, x1, bottom)`` per line). Its ``header`` (title and headings) is read by the model
too, and the whole (header + text + special tokens) never exceeds ``max_tokens``: nothing is
silently truncated.

Memory stays a small multiple of the document: long paragraphs and sentences are measured and cut
a bounded stretch of text at a time, never tokenized whole. A document longer than
``chunk.max_document_chars`` is refused with an ``ExtractError`` ("document too long"), which the
pipeline records as a failed item: it is not truncated, so nothing is indexed that was not read.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from itertools import chain, groupby
from typing import Callable, Iterable, Iterator

from ..config import Profile
from ..embed.tokens import Tokenizer, get_tokenizer
from ..errors import ExtractError
from ..extract.tables import table_start
from ..types import Block, Chunk, Document, LargeDocument
from ..types import content_hash as _hash

__all__ = [
    "chunk_document",
    "chunk_documents",
    "iter_chunks",
    "check_length",
    "split_sentences",
    "embed_text",
    "moved_since",
]

# A token is rarely longer than this many characters: a block longer than ``limit`` times this is
# measured on a prefix, and token windows are cut from pieces this many times ``limit`` long, so a
# huge paragraph is never tokenized whole (which holds every token's string and offsets at once).
_CHARS_PER_TOKEN = 16
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
#: Where the chunker cuts, named in every source's hash (``kbctl.ingest.steps.source_hash``); the
#: name is the sentence splitter's, whose revisions came first: "sentences-2", the unspaced stops
#: too (session 42); "sentences-3", an ASCII ``?``/``!`` between CJK characters too (session 43);
#: "cuts-4", a fenced code block longer than a chunk cut between lines, each piece fenced, and a
#: table under a caption line or without outer bars cut as a table (session 45); "cuts-5", the
#: semantic strategy keeps a code block or table as one unit, or cuts a longer one as the fixed
#: strategy does (session 45, "Indented code, and code under the semantic strategy"); "cuts-6", a
#: table's caption repeated, marked continued, on its pieces after the first, and a sentence longer
#: than a chunk cut at a line end or between words, never inside one, the piece going on a line cut
#: mid-line opened with ``CUT_MARK`` (session 46, "Chunker leftovers"; cutting back to a list's
#: last ``,``/``;`` was measured and dropped: it shortened Cranfield's chunks, nDCG@10 down 0.006);
#: "cuts-7", a table's row longer than a piece cut between cells, else between words, its pieces
#: after the first under the header and opened with ``CUT_MARK``, and a table whose header is too
#: long to repeat cut as a table, under what of its header fits (session 48, "Long table rows and
#: long headers").
SENTENCE_ENDS = "cuts-7"
#: What a stored chunk holds when this chunker may cut its source otherwise than an earlier
#: revision did (a PostgreSQL regular expression, a superset of the new ends), by that revision
#: ("": before session 42). A source stored under an earlier revision's hash none of whose chunks
#: holds it comes out alike: it takes the new hash without being read again (``kbctl.ingest.producer``).
_MARK_BEFORE_CJK = f"[!?]\\s*[{CJK_LETTERS}]"
#: Since "cuts-4": a fenced code block's opening (a block starts a chunk or follows a blank line in
#: it), a long block being cut otherwise; a ``|``, a table under a caption line or without outer
#: bars being a table now. A chunk of a code block that fits, or of a table read as one before,
#: comes out alike (its vector is kept).
_CODE_OR_TABLE = "(^|\n)(```|~~~)|\\|"
#: Since "cuts-5": a table under a caption line (a chunk opens with one or two lines, then a row
#: holding a ``|`` and a rule: the first piece of such a table; one that fits comes out alike)...
_CAPTIONED_TABLE = "^[^\n]*\n([^\n]*\n)?[^\n]*\\|[^\n]*\n[ \t]*\\|?[ \t]*:?-{3,}"
#: ...and a sentence longer than a chunk, cut into windows: the chunk of its first window holds no
#: sentence end and at least 8 characters (a window is as many tokens as the section's limit,
#: never under 8 with ``chunk.size`` at least 16, a token at least a character). What it tests for
#: a sentence's end is narrower than the splitter's (``_SENTENCE_END``), so it misses no such chunk:
#: ``.!?…`` and a space before a capital or digit, a blank line, a list item's line, a CJK stop
#: before what goes on. Not a piece of a code block (it opens with its fence) nor of a table cut as
#: one (its rule in its first four lines): neither moved, but for one whose opening line or header
#: is too long to repeat (cut as prose: its later pieces match, a last one under 8 characters
#: alone does not). A chunk of one sentence that fits matches too and comes out alike (its vector
#: is kept). (``(?:.|\n)``: PostgreSQL allows no ``\S`` in brackets.)
_LONG_LINE = (
    "^(?!```|~~~)(?!([^\n]*\n){1,3}[ \t]*\\|?[ \t]*:?-{3,})(?!(?:.|\n)*([.!?…][\"')\\]]*\\s+[\"'(\\[]?[A-Z0-9]|\n\\s*[-*•]\\s|\n\n"
    f"|[{UNSPACED_STOPS}][^{UNSPACED_STOPS}」』）〕】〉》”’\"')\\]0-9０-９]))(?:.|\n){{8}}"
)
#: Since "cuts-6": a table's rule line (it holds a ``|``)...
_RULE = "[ \t]*\\|?[ \t]*:?-{3,}:?[ \t]*\\|"
#: ...followed by at most one line to the chunk's end: the piece of a row longer than a piece (its
#: first window is alone under the header) or of a first row cut after the header lines; or a rule
#: twice, the header lines cut by a window and repeated; or, not a code block's piece and with no
#: rule in its first four lines, a first line holding a ``|``: a later piece of a table cut as prose,
#: its header too long to repeat (it starts at a row, or with ``…`` mid-row). A table of one row,
#: or of a row that fills a piece alone, matches too and comes out alike (its vectors are kept).
_TABLE_CUT = (
    f"\n{_RULE}[^\n]*(\n[^\n]*)?$|\n{_RULE}(?:.|\n)*\n{_RULE}"
    "|^(?!```|~~~)(?!([^\n]*\n){0,3}[ \t]*\\|?[ \t]*:?-{3,})[^\n]*\\|"
)
MOVED_SINCE = {
    "cuts-6": _TABLE_CUT,
    "cuts-5": f"{_CAPTIONED_TABLE}|{_LONG_LINE}|{_TABLE_CUT}",
    "cuts-4": f"{_CODE_OR_TABLE}|{_LONG_LINE}",
    "sentences-3": f"{_CODE_OR_TABLE}|{_LONG_LINE}",
    "sentences-2": f"{_MARK_BEFORE_CJK}|{_CODE_OR_TABLE}|{_LONG_LINE}",
    "": f"[{UNSPACED_STOPS}]|{_MARK_BEFORE_CJK}|{_CODE_OR_TABLE}|{_LONG_LINE}",
}


def moved_since(profile: Profile) -> dict[str, str]:
    """``MOVED_SINCE`` for ``profile``: "cuts-5" moved only the semantic strategy's code blocks and
    tables, so a source of another strategy stored under "cuts-4" is read again only for what
    "cuts-6" and "cuts-7" moved (a caption, a long line, a long row, a long header), as one stored
    under "cuts-5"."""
    if profile.chunk.strategy == "semantic":
        return MOVED_SINCE
    return {**MOVED_SINCE, "cuts-4": MOVED_SINCE["cuts-5"]}


_SENTENCE_END = re.compile(
    r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n(?=\s*[-*•]\s)|\n{2,}"
    rf"|(?<=[{UNSPACED_STOPS}])(?![{UNSPACED_STOPS}」』）〕】〉》”’\"')\]0-9０-９])\s*"
    f"|{_ASCII_MARK_IN_CJK}"
)


#: A fenced code block's opening: its fence (three or more backticks or tildes) and info string.
_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})[^\n]*")
_NAME_CHAR = re.compile(r"\w")


@dataclass(frozen=True)
class _Unit:
    start: int  # offsets in Document.text
    end: int
    tokens: int
    paragraph_start: bool
    continues: bool = False  # goes on a line cut mid-line: a piece it opens starts with CUT_MARK


#: What opens a piece that goes on a line of prose cut mid-line (a sentence longer than a chunk).
CUT_MARK = "…"


def chunk_documents(docs: Iterable[Document], profile: Profile) -> Iterator[tuple[Document, list[Chunk]]]:
    """Chunk a stream of documents, yielding each with its chunks."""
    tok = get_tokenizer(profile)
    for d in docs:
        yield d, chunk_document(d, profile, tok)


def chunk_document(doc: Document, profile: Profile, tok: Tokenizer | None = None, embed=None) -> list[Chunk]:
    """Split one document into chunks following its structure.

    With ``chunk.strategy = "semantic"``, a section is split into sentences and a new chunk starts
    where the cosine similarity of consecutive sentences' embeddings drops below
    ``chunk.semantic_threshold`` (or the size limit is reached). ``embed(texts) -> vectors``
    defaults to the profile's embedder.
    """
    tok = tok or get_tokenizer(profile)
    _check_length(doc, profile.chunk.max_document_chars)
    if profile.chunk.strategy == "semantic":
        return _semantic(doc, profile, tok, embed)
    return list(_fixed(doc.uri, doc.title, doc.blocks, _WholeText(doc.text), profile, tok))


def iter_chunks(large: LargeDocument, profile: Profile, tok: Tokenizer | None = None) -> Iterator[Chunk]:
    """The chunks of a document read in windows (``LargeDocument``), one at a time.

    The same chunks as ``chunk_document`` of the whole document (same spans, texts, headers and
    hashes), while only the blocks the current chunk spans are held. Not for the semantic strategy
    (it compares every sentence of a section), nor over ``chunk.max_document_chars`` (the caller checks
    ``large.chars`` first: ``check_length``).
    """
    tok = tok or get_tokenizer(profile)
    head = large.head
    yield from _fixed(head.uri, head.title, large.blocks(), _WindowText(), profile, tok)


def check_length(chars: int, limit: int) -> None:
    """A document of ``chars`` characters over ``chunk.max_document_chars`` is an ``ExtractError``."""
    if chars > limit:
        raise ExtractError(
            f"document too long: {chars:,} characters, over the {limit:,} of chunk.max_document_chars",
            hint="split the file, or raise [profile.chunk] max_document_chars",
        )


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


def _check_length(doc: Document, limit: int) -> None:
    """A document longer than ``chunk.max_document_chars`` is refused (recorded as a failed item)."""
    check_length(len(doc.text), limit)


def _semantic(doc: Document, profile: Profile, tok: Tokenizer, embed) -> list[Chunk]:
    """Sentence runs that stay on one topic, within the size limit, never across sections/pages; a
    code block or a table is one unit, or, longer than a chunk, cut on its own as ``_fixed`` cuts it."""
    if embed is None:
        from ..embed import get_embedder

        embed = get_embedder(profile).embed_documents
    size, threshold = profile.chunk.size, profile.chunk.semantic_threshold
    chunks: list[Chunk] = []
    for heading, page, blocks in _sections(doc.blocks):
        header = _header(doc.title, heading)
        limit = min(size, profile.max_tokens - tok.special_tokens - (tok.count(header) + 2 if header else 0))
        counted: dict[int, int] = {}  # a code block or table that fits: its tokens, counted once
        for alone, run in groupby(blocks, key=_longer_than(limit, tok, counted, code=False)):
            pieces: Iterable[tuple[int, int, str]]
            if alone:  # a code block or table longer than a chunk: cut as the fixed strategy cuts it
                pieces = chain.from_iterable(_alone_pieces(b, _WholeText(doc.text), limit, tok) for b in run)
            else:
                units = [u for b in run for u in _semantic_units(doc.text, b, limit, tok, counted.pop(b.start, None))]
                pieces = _topic_pieces(doc.text, units, limit, threshold, embed)
            for start, end, text in pieces:
                chunks.append(Chunk(doc.uri, len(chunks), text, tok.count(text), start, end, heading, page, header))
    return chunks


def _topic_pieces(text: str, units: list[_Unit], limit: int, threshold: float, embed) -> list[tuple[int, int, str]]:
    """Runs of ``units`` that stay on one topic (the similarity of consecutive units' embeddings at
    least ``threshold``), within ``limit`` tokens."""
    import numpy as np

    if not units:
        return []
    vecs = np.asarray(embed([_marked(text, u) for u in units]), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
    sims = (vecs[1:] * vecs[:-1]).sum(axis=1)
    run: list[_Unit] = [units[0]]
    runs = []
    for u, sim in zip(units[1:], sims):
        if sum(x.tokens for x in run) + u.tokens > limit or sim < threshold:
            runs.append(run)
            run = []
        run.append(u)
    runs.append(run)
    return [(r[0].start, r[-1].end, (CUT_MARK if r[0].continues else "") + text[r[0].start : r[-1].end]) for r in runs]


def _marked(text: str, u: _Unit) -> str:
    return (CUT_MARK if u.continues else "") + text[u.start : u.end]


def _is_code_or_table(block_text: str) -> bool:
    return _fence(block_text) is not None or table_start(block_text) is not None


def _alone_pieces(block: Block, text, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, str]]:
    if table_start(block.text) is not None:
        return _table_pieces(block, text, limit, tok)
    return _code_pieces(block, text, limit, tok)


def _semantic_units(text: str, block: Block, limit: int, tok: Tokenizer, counted: int | None) -> Iterator[_Unit]:
    """A block's units for the semantic strategy: a code block or table that fits is one (its
    tokens ``counted`` already), a paragraph its sentences (``_sentence_units``)."""
    if counted is not None:
        yield _Unit(block.start, block.start + len(block.text), counted, True)
        return
    yield from _sentence_units(text, block, limit, tok)


def _sentence_units(text: str, block: Block, limit: int, tok: Tokenizer) -> Iterator[_Unit]:
    for s, e in split_sentences(text, block.start, block.start + len(block.text)):
        n = tok.count(text[s:e])
        if n <= limit:
            yield _Unit(s, e, n, False)
        else:
            for ws, we, wm, goes_on in _line_windows(text, s, e, limit, tok):
                yield _Unit(ws, we, wm, False, goes_on)


def embed_text(text: str, title: str = "", heading: Iterable[str] = (), content_hash: str | None = None) -> str:
    """What the model reads for a chunk of ``text`` in a document titled ``title`` under
    ``heading``: its header (title and headings, ``Chunk.header``), a blank line, and the text,
    as ``Chunk.embed_text`` gives it for a chunk this module made.

    A chunk read back from the store has its text, title and headings but not its header, which
    the chunker drops when a title is too long to leave room for the text (``_fixed``: decided
    with the tokenizer of the profile that chunked it, which a later generation may not have).
    Its ``content_hash``, the hash of exactly what the model read, records which: given it, the
    form that has that hash is returned.
    """
    header = _header(title or "", tuple(heading or ()))
    if not header:
        return text
    full = f"{header}\n\n{text}"
    if content_hash is not None and _hash(full) != content_hash and _hash(text) == content_hash:
        return text  # the header was dropped when it was chunked
    return full


def _header(title: str, heading: tuple[str, ...]) -> str:
    parts = [p for p in (title, *heading) if p]
    # the first heading is often the title again
    if len(parts) > 1 and parts[0].strip().lower() == parts[1].strip().lower():
        parts = parts[1:]
    return " > ".join(parts)


def _sections(blocks: tuple[Block, ...]) -> Iterator[tuple[tuple[str, ...], int | None, list[Block]]]:
    """Runs of consecutive blocks that share a heading path and a page."""
    run: list[Block] = []
    for b in blocks:
        if run and (b.heading_path != run[0].heading_path or b.page != run[0].page):
            yield run[0].heading_path, run[0].page, run
            run = []
        run.append(b)
    if run:
        yield run[0].heading_path, run[0].page, run


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
