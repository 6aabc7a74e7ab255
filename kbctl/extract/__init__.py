"""The extract stage: turn a fetched ``Source`` into one or more ``Document``\\ s.

::

    format      recognised by                                  documents         source_type
    text        .txt .text, text/plain, anything textual        1                 text
    markdown    .md .markdown, text/markdown, front matter      1                 markdown
    html        .html .htm .xhtml, text/html                    1                 html
    pdf         .pdf, application/pdf, %PDF- signature          1                 pdf
    docx        .docx, its media type, a zip with word/ parts   1                 docx
    pptx        .pptx, its media type, a zip with ppt/ parts    1                 pptx
    xlsx        .xlsx, its media type, a zip with xl/ parts     1                 xlsx
    odt         .odt, its media type, an ODF text's mimetype    1                 odt
    email       .eml, message/rfc822, mail headers              1 + attachments   email (+ theirs)
    mbox        .mbox, application/mbox, a "From " line         1 per message     email
    feed        .rss .atom .rdf, feed XML (.xml), feed types    1 per entry       feed

(see ``detect`` for the exact order). Every document carries ``source_type``, ``path`` (for
``file://`` uris) and the source's own metadata (``size``, ``mtime``…); each module's docstring
lists what else it keeps. Text must be UTF-8 (a BOM is fine), UTF-16/32 with a BOM, or in the
charset a transport declared; an HTML page, and text fetched from a URL, that declare none Python
knows fall back to windows-1252 unless mostly UTF-8 (``base.decode_web_text``).

``extract`` raises ``kbctl.errors.ExtractError`` (one line, with a hint) for: binary or unknown
files, undecodable text, corrupt or encrypted PDFs and office documents, PDFs without text, malformed or empty feeds,
generic XML, and documents without any text. Heavy libraries (trafilatura, pdfplumber,
feedparser) are imported only when a source needs them.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator

from ..types import Document, LargeDocument, Source
from .detect import SUPPORTED_SUFFIXES, detect_format, guess_media_type
from .options import ExtractOptions
from .record import RECORD_MEDIA_TYPE, extract_record

__all__ = [
    "extract",
    "extract_large",
    "ExtractOptions",
    "SUPPORTED_SUFFIXES",
    "guess_media_type",
    "detect_format",
    "REVISIONS",
    "extractor_revision",
    "source_revision",
]

#: Sources smaller than this are always read whole (``extract``).
LARGE_BYTES = 1 << 20

#: The revision of each format's extractor (by ``detect_format``'s name, "record" for a record): it
#: moves when a change gives other text for a file it read before. It is part of a source's version
#: (``kbctl.ingest.steps.source_hash``), so the next ingest reads a stored source of that format again
#: instead of skipping it; a format not named here hashes as before revisions were counted.
#: "pdf-2", "html-2": hyphenation, running headers, two columns; bare ``<pre>``, header-less tables,
#: table cells in a mail's HTML, a code block's empty lines (session 43, docs/hardening.md "Document
#: fidelity QA"); "docx-2", "odt-2": footnotes and endnotes, list numbers and bullets (session 43,
#: "Word and OpenDocument fidelity"); "docx-3": numbered headings, multi-level labels, lists linked to
#: a numbering style, list labels in table cells; "odt-3": headings held in list items keep their
#: labels, multi-level labels (``text:display-levels``) (session 44, "Word and OpenDocument
#: numbering, continued"); "pdf-3": a two-column page's bands around a full-width block read column
#: by column, a listing beside a few notes line by line, a URL or path broken at its own hyphen keeps
#: it (session 44, "PDF reading order and broken URLs"). The ``[extract]`` settings that change a
#: PDF's text join them where they are not the defaults (``ExtractOptions.revision``). "docx-4":
#: a level's suffix, ``w:lvlRestart``, a label with other text than its number after a ``- ``, a
#: numbering style found through ``styles.xml``, nested levels in a table cell marked (U+203A);
#: "odt-4": headings numbered by the outline style, a label with a prefix or of several levels
#: after a ``- ``; "pdf-4": a URL or path broken after ``/`` or ``.`` joined, the hyphen after an
#: upper-case token kept (``TCP/IP-based``) (session 45, "Document fidelity, continued"); "pdf-5":
#: pages of three columns, and bands of columns whose gutters lie apart, read column by column; an
#: unruled table of short cells and a monospaced listing with its comments aligned beside it line by
#: line (session 45, "PDF columns: several gutters a page"). "markdown-1": an indented code block
#: is a fenced block (session 45, "Indented code, and code under the semantic strategy"); a mail and
#: an mbox, which read Markdown attachments, move with it.
REVISIONS: dict[str, str] = {
    "pdf": "pdf-5",
    "html": "html-2",
    "docx": "docx-4",
    "odt": "odt-4",
    "markdown": "markdown-1",
}

_FORMATS = ("text", "markdown", "html", "pdf", "docx", "pptx", "xlsx", "odt", "email", "mbox", "feed")
#: The formats whose extractors hand text to others': a mail its HTML body (``html.html_paragraphs``)
#: and its attachments (any format, by ``extract``), a feed its HTML entries. Their text moves with those.
_READS = {"email": _FORMATS, "mbox": _FORMATS, "feed": ("html",)}


def extractor_revision(fmt: str, options: ExtractOptions | None = None) -> str:
    """The revision of what ``fmt``'s extractor gives: its own and those of the extractors it hands
    text to (``REVISIONS``), with what of the ``[extract]`` settings (``options``) changes their text
    (``ExtractOptions.revision``: a PDF's ``tables`` and OCR, where not the defaults), joined; ""
    while none of them moved (the hash of before)."""
    options = options or ExtractOptions()
    revisions: set[str] = set()
    for f in (fmt, *_READS.get(fmt, ())):
        revisions.update((REVISIONS.get(f, ""), *options.revision(f)))
    return " ".join(sorted(r for r in revisions if r))


def source_revision(source: Source, options: ExtractOptions | None = None) -> str:
    """``extractor_revision`` of the extractor that reads ``source`` (its format as ``extract``
    detects it, from its first bytes) under ``options`` (the ``[extract]`` settings, the defaults
    when None); "" for one that no extractor reads (extracting it fails)."""
    if source.media_type == RECORD_MEDIA_TYPE:
        return extractor_revision("record", options)
    try:
        fmt = detect_format(source)
    except Exception:  # binary, generic XML: its extraction fails and says why; nothing is stored
        return ""
    return extractor_revision(fmt, options)


def extract(source: Source, options: ExtractOptions | None = None) -> list[Document]:
    """The documents in ``source`` (one, or several for an mbox, a feed or a mail with attachments);
    ``options`` are the ``[extract]`` settings (OCR, tables)."""
    if source.media_type == RECORD_MEDIA_TYPE:
        return extract_record(source)
    return _extractor(detect_format(source), options or ExtractOptions())(source)


def extract_large(source: Source, *, text: bool = True) -> LargeDocument | Iterator[Document] | None:
    """A large source read without holding its documents, or ``None`` when ``extract`` reads it.

    A plain-text file of 1 MB or more (with ``text``) is a ``LargeDocument`` (``stream``); a feed of
    1 MB or more that the streaming reader reads gives its entries one at a time (``feed.iter_feed``).
    Errors are those of ``extract`` (an ``ExtractError``, raised here or, for a feed, at its end).
    """
    if source.media_type == RECORD_MEDIA_TYPE or len(source.content) < LARGE_BYTES:
        return None
    fmt = detect_format(source)
    if fmt == "feed":
        from .feed import iter_feed

        return iter_feed(source)
    if not text:
        return None
    from .stream import read_large

    return read_large(source, fmt)


def _extractor(fmt: str, options: ExtractOptions) -> Callable[[Source], list[Document]]:
    """The function reading ``fmt``; the modules import their heavy libraries lazily themselves."""
    if fmt == "text":
        from .text import extract_text

        return extract_text
    if fmt == "markdown":
        from .text import extract_markdown

        return extract_markdown
    if fmt == "html":
        from .html import extract_html

        return extract_html
    if fmt == "pdf":
        from .pdf import extract_pdf

        return partial(extract_pdf, options=options)
    if fmt == "odt":
        from .odf import extract_odt

        return extract_odt
    if fmt in ("docx", "pptx", "xlsx"):
        from . import office

        return getattr(office, f"extract_{fmt}")
    if fmt in ("email", "mbox"):
        from .mail import extract_eml, extract_mbox

        # attachments are read by this same dispatch, handed down so mail never imports the package
        return partial(extract_eml if fmt == "email" else extract_mbox, extract_part=partial(extract, options=options))
    if fmt == "feed":
        from .feed import extract_feed

        return extract_feed
    raise ValueError(f"unknown format {fmt!r}")  # pragma: no cover - detect_format returns only the names above
