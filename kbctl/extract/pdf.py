"""PDF files (``source_type="pdf"``), read with pdfplumber.

Keeps the text of every page, split into paragraphs where the vertical gap between two lines is
clearly larger than the usual line spacing; every block has its 1-based ``page``. Pages without
text are skipped, and so are running headers and footers (a one-line paragraph repeated at the
top or bottom of most pages). Metadata: ``page_count``, and from the PDF's info dictionary ``pdf_title``,
``author``, ``date`` (the creation date, ISO 8601), ``subject`` and ``tags`` (its keywords).
Title: the info ``Title``, else the first line of page 1 (when shorter than 120 characters), else
the file's stem.

Errors: a PDF pdfplumber cannot open or read is "corrupt or unreadable PDF"; an encrypted one is
"encrypted PDF (password required)"; one without any text (a scan) says that OCR is not supported.
"""

from __future__ import annotations

import io
import logging
import re
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from statistics import median
from typing import Any

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, stem_of

__all__ = ["extract_pdf", "pdf_date", "drop_running_lines"]

log = logging.getLogger(__name__)

_TITLE_MAX = 120
_PDF_DATE = re.compile(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*(Z|[+-]\d{2}'?\d{2}'?)?")


def extract_pdf(source: Source) -> list[Document]:
    """A PDF as one document, with one or more blocks per page."""
    info, pages = _read(source.content)
    if not pages:
        raise _pdf_error(ValueError("the document has no pages"))
    pages = drop_running_lines(pages)
    blocks = [Block(p, page=n) for n, paragraphs in enumerate(pages, 1) for p in paragraphs]
    if not blocks:
        raise ExtractError(
            f"no extractable text in PDF ({len(pages)} page{'s' if len(pages) != 1 else ''}; "
            "scanned images? OCR is not supported)",
            hint="run OCR first (e.g. `ocrmypdf in.pdf out.pdf`) and ingest the result",
        )
    meta = _metadata(info, len(pages))
    first_line = pages[0][0].split("\n", 1)[0].strip() if pages and pages[0] else ""
    title = meta.get("pdf_title") or (first_line if len(first_line) < _TITLE_MAX else "") or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="pdf", metadata=meta)]


def _read(data: bytes) -> tuple[dict[str, Any], list[list[str]]]:
    """The info dictionary and each page's paragraphs; pdfplumber's errors become ExtractErrors."""
    import pdfplumber  # heavy; only for PDFs

    try:
        with pdfplumber.open(io.BytesIO(data)) as pdf:
            return dict(pdf.metadata or {}), [_page_paragraphs(p) for p in pdf.pages]
    except ExtractError:
        raise
    except Exception as e:  # pdfminer raises many unrelated classes for bad input
        raise _pdf_error(e) from e


def _pdf_error(e: Exception) -> ExtractError:
    name = type(e).__name__
    if any("Password" in n or "Encrypt" in n for n in _causes(e)):
        return ExtractError("encrypted PDF (password required)", hint="decrypt it first, e.g. `qpdf --decrypt`")
    reason = str(e).strip() or name
    return ExtractError(
        f"corrupt or unreadable PDF: {reason[:200]}",
        hint="re-export the PDF or repair it (e.g. `qpdf in.pdf out.pdf`)",
    )


def _causes(e: BaseException) -> list[str]:
    """Class names of ``e``, its causes and its arguments: pdfplumber wraps pdfminer's
    ``PDFPasswordIncorrect`` in a ``PdfminerException``."""
    names: list[str] = []
    seen: set[int] = set()
    todo: list[object] = [e]
    while todo:
        x = todo.pop()
        if not isinstance(x, BaseException) or id(x) in seen:
            continue
        seen.add(id(x))
        names.append(type(x).__name__)
        todo += [x.__cause__, x.__context__, *x.args]
    return names


def _page_paragraphs(page) -> list[str]:
    """A page's lines grouped into paragraphs at gaps wider than the usual line spacing."""
    lines = [ln for ln in page.extract_text_lines(return_chars=False) if ln["text"].strip()]
    if not lines:
        return []
    gaps = [b["top"] - a["bottom"] for a, b in pairwise(lines)]
    heights = [ln["bottom"] - ln["top"] for ln in lines]
    limit = max(1.5 * median(g for g in gaps if g > 0) if any(g > 0 for g in gaps) else 0, median(heights))
    paragraphs, current = [], [lines[0]["text"].strip()]
    for gap, line in zip(gaps, lines[1:]):
        if gap > limit:
            paragraphs.append("\n".join(current))
            current = []
        current.append(line["text"].strip())
    paragraphs.append("\n".join(current))
    return paragraphs


def drop_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Drop running headers and footers: a one-line first or last paragraph that recurs at the same
    place on at least half of the pages (and on two or more), its page number aside."""
    if len(pages) < 2:
        return pages
    running = set()
    for at in (0, -1):
        keys = [_line_key(p[at], n) for n, p in enumerate(pages, 1) if p]
        running |= {(at, k) for k in set(keys) if k and keys.count(k) >= max(2, len(pages) / 2)}
    out = []
    for n, page in enumerate(pages, 1):
        page = list(page)
        for at in (0, -1):
            if page and (at, _line_key(page[at], n)) in running:
                page.pop(at)
        out.append(page)
    return out


def _line_key(paragraph: str, page_number: int) -> str | None:
    """A one-line paragraph with its page number masked (``None`` for longer paragraphs)."""
    if "\n" in paragraph or len(paragraph) > _TITLE_MAX:
        return None
    return re.sub(rf"(?<!\d){page_number}(?!\d)", "#", paragraph.strip(), count=1)


def _metadata(info: dict[str, Any], page_count: int) -> dict[str, Any]:
    """``page_count`` and the useful fields of the PDF info dictionary."""
    meta: dict[str, Any] = {"page_count": page_count}
    for key, name in (("Title", "pdf_title"), ("Author", "author"), ("Subject", "subject")):
        value = _info_text(info.get(key))
        if value:
            meta[name] = value
    created = pdf_date(_info_text(info.get("CreationDate")))
    if created:
        meta["date"] = created
    keywords = _info_text(info.get("Keywords"))
    if keywords:
        meta["tags"] = [k.strip() for k in re.split(r"[,;]", keywords) if k.strip()]
    return meta


def _info_text(value: Any) -> str:
    """An info value as clean text (pdfminer may give bytes or other objects)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return " ".join(str(value).split()) if value is not None else ""


def pdf_date(value: str | None) -> str | None:
    """``D:20240115093000+01'00'`` → ``2024-01-15T08:30:00Z``; ``None`` when it does not parse."""
    m = _PDF_DATE.match(value or "")
    if not m:
        return None
    y, mo, d, h, mi, s, tz = m.groups()
    try:
        dt = datetime(int(y), int(mo or 1), int(d or 1), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    if tz:
        dt = dt.replace(tzinfo=_offset(tz))
    return iso_datetime(dt)


def _offset(tz: str) -> timezone:
    if tz == "Z":
        return UTC
    digits = tz.replace("'", "")
    sign = -1 if digits[0] == "-" else 1
    return timezone(sign * timedelta(hours=int(digits[1:3]), minutes=int(digits[3:5] or 0)))
