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

The package, by noun: ``units`` (the unit packed, the packing), ``sentences`` (sentence ends and
the windows of a longer one), ``code`` (long code blocks), ``tables`` (tables under their header),
``structure`` and ``semantic`` (the two strategies), ``revision`` (``SENTENCE_ENDS``, ``MOVED_SINCE``).
This module is the stage's API, and names what ``kbctl.chunk`` offered as one module (``noqa: F401``):
``SENTENCE_ENDS`` is read here by ``kbctl.ingest.steps.source_hash`` at each call, and the tests that
emulate an earlier revision read its private names here.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from ..config import Profile
from ..embed.tokens import Tokenizer, get_tokenizer
from ..errors import ExtractError
from ..extract.tables import table_start  # noqa: F401
from ..types import Chunk, Document, LargeDocument
from ..types import content_hash as _hash
from .code import _fence  # noqa: F401
from .revision import _CAPTIONED_TABLE, _LONG_LINE, _TABLE_CUT, MOVED_SINCE, SENTENCE_ENDS, moved_since  # noqa: F401
from .semantic import _semantic
from .sentences import _SENTENCE_END, CJK_LETTERS, UNSPACED_STOPS, _line_windows, _windows, split_sentences  # noqa: F401
from .structure import _fixed, _header, _WholeText, _WindowText
from .tables import CONTINUED, TABLE_CONTINUED, _continued_head, _table_pieces  # noqa: F401
from .units import CUT_MARK, _count_within, _pack, _prose_pieces, _Unit  # noqa: F401

__all__ = [
    "chunk_document",
    "chunk_documents",
    "iter_chunks",
    "check_length",
    "split_sentences",
    "embed_text",
    "moved_since",
]


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


def _check_length(doc: Document, limit: int) -> None:
    """A document longer than ``chunk.max_document_chars`` is refused (recorded as a failed item)."""
    check_length(len(doc.text), limit)


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
