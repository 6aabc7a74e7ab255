"""Large plain-text sources read in windows, never decoded whole.

A text file of ``STREAM_MIN_BYTES`` or more is not turned into one ``Document`` holding its text
(a 45 MB file would be 90 MB of ``str`` once one character is outside latin-1, plus its paragraph
blocks and its chunks). ``read_large`` reads its bytes once, a window at a time, to learn what
the pipeline needs before writing (the decoding, the title, the length in characters, the notes,
whether it holds any text) and returns a ``LargeDocument`` whose ``blocks()`` reads the bytes
again the same way; ``with_hash`` reads them a second time for the content hash (once the caller
has settled the head's metadata: ACLs lifted), and the chunker a third. Each paragraph is its own
``str`` (1 byte a character unless it holds a wider one), and only the paragraphs a chunk spans
are alive at once.

The blocks, their offsets, the title, the metadata and the content hash are exactly those of
``extract_text`` (a test compares them), so a file that grows past the threshold, or shrinks
below it, is not a changed document.
"""

from __future__ import annotations

import codecs
from typing import Callable, Iterator

from ..errors import ExtractError
from ..textutil.clean import CLEANED, clean_text, removed
from ..types import Block, Document, LargeDocument, Source, document_hash
from .base import (
    _BOMS,
    NOT_UTF8_HINT,
    URL_NOT_UTF8_HINT,
    _known_codec,
    common_metadata,
    is_url,
    source_facts,
    stem_of,
    windows_1252,
)
from .text import _FIRST_LINE, _TITLE_MAX

__all__ = ["STREAM_MIN_BYTES", "read_large"]

#: Text sources at least this large are read in windows (smaller ones are held whole: it is faster).
STREAM_MIN_BYTES = 1 << 20
_WINDOW = 1 << 20  # bytes decoded at a time


def read_large(source: Source, fmt: str) -> LargeDocument | None:
    """``source`` as a ``LargeDocument`` when it is text of ``fmt`` that is read in windows, else ``None``.

    Raises ``ExtractError`` as ``extract_text`` does (undecodable bytes, no text). The head's
    ``content_hash`` is not yet the document's: ``with_hash`` sets it.
    """
    if fmt != "text" or len(source.content) < STREAM_MIN_BYTES:
        return None
    data, charset = source.content, source.metadata.get("charset")
    codec, label = _codec(data, charset)
    tally = _Tally()
    try:
        tally.run(_blocks(data, codec, label, tally.removed))
    except _NotUtf8 as e:
        if charset and _known_codec(charset):
            codec, label = charset, charset
        elif is_url(source.uri) and windows_1252(data):  # as decode_source_text reads it
            codec, label = "cp1252", "windows-1252"
        else:
            raise ExtractError(
                f"not valid UTF-8 text (byte 0x{data[e.offset]:02x} at offset {e.offset})",
                hint=URL_NOT_UTF8_HINT if is_url(source.uri) else NOT_UTF8_HINT,
            ) from None
        tally = _Tally()
        tally.run(_blocks(data, codec, label, tally.removed))
    if not tally.blocks:
        raise ExtractError("empty document (no text)", hint="the item holds no extractable text")
    dropped = sum(n for n in tally.removed if isinstance(n, int))
    title = next((t for t in tally.removed if isinstance(t, str)), "")
    title = title if 0 < len(title) < _TITLE_MAX else stem_of(source.uri)
    notes = ((CLEANED, removed(dropped, "the text")),) if dropped else ()
    # A Document without text cleans the uri, title and metadata (and notes what it removed) as the
    # whole one would; its hash is then replaced by the hash of the whole.
    probe = Document(
        uri=source.uri,
        title=title.strip() or stem_of(source.uri),
        text="",
        blocks=(),
        source_type="text",
        metadata=common_metadata(source, "text"),
        notes=notes,
        fetch_facts=source_facts(source, {}),
    )
    return LargeDocument(probe, tally.chars, _reader(data, codec, label))


def with_hash(large: LargeDocument, head: Document) -> LargeDocument:
    """``large`` with ``head`` (its head after ACLs were lifted, say) and the content hash of the whole."""
    h = document_hash(head.title, head.metadata, _pieces(large.blocks()), head.fetch_facts)
    return LargeDocument(_rehashed(head, h), large.chars, large.blocks)


def _rehashed(head: Document, h: str) -> Document:
    import dataclasses

    return dataclasses.replace(head, content_hash=h)


def _pieces(blocks: Iterator[Block]) -> Iterator[str]:
    """The text of the document, block by block, as ``"\\n\\n".join`` would give it."""
    for n, b in enumerate(blocks):
        if n:
            yield "\n\n"
        yield b.text


def _reader(data: bytes, codec: str, label: str) -> Callable[[], Iterator[Block]]:
    return lambda: _blocks(data, codec, label)


class _NotUtf8(Exception):
    def __init__(self, offset: int) -> None:
        self.offset = offset


class _Tally:
    """What one pass over the blocks tells: how many, the characters, the title line, what cleaning removed."""

    def __init__(self) -> None:
        self.blocks = 0
        self.chars = 0
        # characters cleaning removed, per paragraph that lost some; then the title line (uncleaned,
        # as extract_text reads it: the document then notes what cleaning removes from its title)
        self.removed: list[int | str] = []

    def run(self, blocks: Iterator[Block]) -> None:
        for b in blocks:
            self.blocks += 1
            self.chars = b.start + len(b.text)


def _codec(data: bytes, charset: str | None) -> tuple[str, str]:
    """The codec and its label: a BOM decides, else UTF-8 (``_NotUtf8`` tells when it is not)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, codec.split("-sig")[0].upper()
    return "utf-8", ""


def _blocks(data: bytes, codec: str, label: str, removed: list[int | str] | None = None) -> Iterator[Block]:
    """The paragraphs of ``data`` as ``split_paragraphs`` and ``Document.from_blocks`` make them.

    A paragraph is a run of lines between lines of only spaces and tabs (``\\n[ \\t]*\\n``),
    stripped, cleaned (``clean_text``) and stripped again; empty ones are dropped. How many
    characters cleaning removed is appended to ``removed`` (when given) for each paragraph that lost
    some, and the first line of the text that is not blank (``str``; ``_TITLE_MAX`` characters at most).
    """
    pos = 0
    lines: list[str] = []
    for line in _lines(data, codec, label):
        if line.strip(" \t"):
            lines.append(line)
            continue
        block = _block(lines, pos, removed)
        lines = []
        if block is not None:
            yield block
            pos = block.start + len(block.text) + 2
    block = _block(lines, pos, removed)
    if block is not None:
        yield block


def _block(lines: list[str], pos: int, removed: list[int | str] | None) -> Block | None:
    if not lines:
        return None
    text = "\n".join(lines).strip() if len(lines) > 1 else lines[0].strip()
    if not text:
        return None
    if removed is not None and not removed:  # the first paragraph: nothing recorded yet
        m = _FIRST_LINE.search(text)  # extract_text's title: the first line that is not blank
        first = m.group(0).strip() if m else ""
        removed.append(first if len(first) < _TITLE_MAX else "-" * _TITLE_MAX)
    clean, n = clean_text(text)
    if n and removed is not None:
        removed.append(n)
    clean = clean.strip()
    return Block(clean, pos) if clean else None


def _lines(data: bytes, codec: str, label: str) -> Iterator[str]:
    """The decoded lines (``\\r\\n`` and ``\\r`` read as ``\\n``), a window of bytes at a time."""
    decoder = codecs.getincrementaldecoder(codec)("strict")
    # The line being read, grown in place (``+=`` on the only reference to a str resizes it), so a
    # line of many windows is never held twice, as pieces and joined.
    partial = ""
    cr = False  # the previous window ended in "\r": a "\n" opening this one belongs to it
    first = True
    for offset in range(0, len(data) or 1, _WINDOW):
        end = offset + _WINDOW
        try:
            text = decoder.decode(data[offset:end], final=end >= len(data))
        except UnicodeDecodeError as e:
            raise _decode_error(codec, label, offset + e.start) from None
        if cr and text.startswith("\n"):
            text = text[1:]
        cr = text.endswith("\r")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if first and text:
            text, first = text.lstrip("\ufeff"), False
        start = 0
        while (nl := text.find("\n", start)) >= 0:
            if partial:
                partial += text[start:nl]
                piece, partial = partial, ""
            else:
                piece = text[start:nl]
            yield piece
            start = nl + 1
        if start < len(text):
            partial += text[start:]
        del text
    yield partial


def _decode_error(codec: str, label: str, offset: int) -> Exception:
    if not label:
        return _NotUtf8(offset)
    return ExtractError(
        f"not valid {label} text (undecodable bytes at offset {offset})", hint="re-encode the file as UTF-8"
    )
