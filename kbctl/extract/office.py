"""Office documents: Word (``.docx``), PowerPoint (``.pptx``) and Excel (``.xlsx``) files.

Read with python-docx, python-pptx and openpyxl (imported only when such a file comes):

- **Word** (``source_type="docx"``): paragraphs in document order; ``Title`` and ``Heading N``
  paragraphs are structure (the ``heading_path`` of what follows, not text); tables become
  Markdown tables (``kbctl.extract.tables``), a caption paragraph just before or after one
  ("Table 2: …", or the ``Caption`` style) joining its heading path.
- **PowerPoint** (``source_type="pptx"``): one section per slide, its heading path the slide's
  title (``Slide N`` when it has none) and its ``page`` the slide number; text frames, tables
  (as Markdown tables), grouped shapes and the speaker notes (heading path ``… > Notes``).
- **Excel** (``source_type="xlsx"``): each sheet with values a Markdown table under the sheet's
  name, its first row as the header (cell values as computed when last saved, not formulas).

Metadata from the document properties: ``title``, ``author``, ``date`` (created), ``modified``
(both ISO 8601), ``subject``, ``tags`` (keywords), ``last_modified_by``; and ``slide_count`` or
``sheets``. Title: the ``title`` property, else the first heading (Word) or first slide's title,
else the file's stem.

Errors (each an ``ExtractError``, recorded for the item while the batch goes on): an encrypted
file (an OLE container where a zip was expected) is "encrypted Word document (password
required)"; a file the library cannot open is "corrupt or unreadable … document".
"""

from __future__ import annotations

import io
import logging
import zipfile
from datetime import UTC, date, datetime
from typing import Any, Callable, Iterable, Iterator

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, stem_of
from .tables import is_caption, markdown_table

__all__ = ["extract_docx", "extract_pptx", "extract_xlsx", "OLE_MAGIC"]

log = logging.getLogger(__name__)

#: The signature of an OLE compound file: what an encrypted OOXML file (or a legacy .doc) starts with.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_KIND = {"docx": "Word", "pptx": "PowerPoint", "xlsx": "Excel"}
_MAX_ROWS = 1_000_000  # a sheet's rows read at most (Excel's own limit is 1,048,576)


def extract_docx(source: Source) -> list[Document]:
    """A Word document as one document: headings → heading paths, tables → Markdown tables."""
    doc = _open("docx", source.content)
    blocks = list(_docx_blocks(doc))
    meta = _properties(doc.core_properties)
    first_heading = next((b.heading_path[0] for b in blocks if b.heading_path), "")
    title = meta.get("title") or first_heading or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="docx", metadata=meta)]


def extract_pptx(source: Source) -> list[Document]:
    """A presentation as one document, a section per slide (its title the heading, its number the page)."""
    prs = _open("pptx", source.content)
    blocks: list[Block] = []
    titles: list[str] = []
    for n, slide in enumerate(prs.slides, 1):
        title = _slide_title(slide)
        titles.append(title)
        path = (title or f"Slide {n}",)
        blocks += [Block(t, heading_path=path, page=n) for t in _shape_texts(slide.shapes, skip=_title_id(slide))]
        notes = (
            slide.notes_slide.notes_text_frame.text
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame
            else ""
        )
        if notes.strip():
            blocks.append(Block(notes, heading_path=(*path, "Notes"), page=n))
    meta = _properties(prs.core_properties)
    meta["slide_count"] = len(titles)
    title = meta.get("title") or next((t for t in titles if t), "") or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="pptx", metadata=meta)]


def extract_xlsx(source: Source) -> list[Document]:
    """A workbook as one document: every sheet with values a Markdown table under the sheet's name."""
    wb = _open("xlsx", source.content)
    try:
        blocks = []
        for ws in wb.worksheets:
            rows = [list(r) for _, r in zip(range(_MAX_ROWS), ws.iter_rows(values_only=True))]
            table = markdown_table([[_value(v) for v in r] for r in rows])
            if table:
                blocks.append(Block(table, heading_path=(ws.title,)))
        meta = _properties(wb.properties)
        meta["sheets"] = list(wb.sheetnames)
    finally:
        wb.close()
    title = meta.get("title") or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="xlsx", metadata=meta)]


def _open(kind: str, data: bytes):
    """The library's object for ``data``; ``ExtractError`` when encrypted, corrupt or the library is missing."""
    name = _KIND[kind]
    if data.startswith(OLE_MAGIC):
        raise ExtractError(
            f"encrypted {name} document (password required), or an old binary format",
            hint="remove the password (File > Info > Protect) or save it again as ." + kind,
        )
    opener = _opener(kind)
    try:
        return opener(io.BytesIO(data))
    except Exception as e:  # zipfile, lxml and the libraries' own errors for bad input
        reason = str(e).strip() or type(e).__name__
        if isinstance(e, zipfile.BadZipFile):
            reason = f"not a zip archive ({reason})"
        raise ExtractError(
            f"corrupt or unreadable {name} document: {reason[:200]}",
            hint=f"open and save it again in {name} or LibreOffice, then ingest it again",
        ) from e


def _opener(kind: str) -> Callable[[io.BytesIO], Any]:
    """The opening function of the library reading ``kind`` (imported here: only office files need it)."""
    if kind == "docx":
        import docx

        return docx.Document
    if kind == "pptx":
        import pptx

        return pptx.Presentation
    import openpyxl

    return lambda f: openpyxl.load_workbook(f, read_only=True, data_only=True)


def _docx_blocks(doc) -> Iterator[Block]:
    """The paragraphs and tables of a Word document in order, under the headings above them."""
    from docx.table import Table

    headings: list[tuple[int, str]] = []
    pending: Block | None = None  # a caption paragraph that may belong to the next table
    last_table: Block | None = None
    for item in doc.iter_inner_content():
        path = tuple(t for _, t in headings)
        if isinstance(item, Table):
            caption = pending.text if pending else None
            pending = None
            text = markdown_table(_docx_rows(item))
            last_table = Block(text, heading_path=(*path, caption) if caption else path) if text else None
            if last_table:
                yield last_table
            continue
        text = item.text.strip()
        level = _heading_level(item)
        if not text:
            continue
        if pending:
            yield pending
            pending = None
        if level is not None:
            headings = [h for h in headings if h[0] < level] + [(level, text)]
        elif _is_caption_paragraph(item, text):
            if last_table is not None and len(last_table.heading_path) == len(path):
                # a caption below the table: said again as the table's own line, not lost
                yield Block(text, heading_path=path)
            else:
                pending = Block(text, heading_path=path)
        else:
            yield Block(text, heading_path=path)
        last_table = None
    if pending:
        yield pending


def _heading_level(paragraph) -> int | None:
    """1 for ``Title`` and ``Heading 1``, N for ``Heading N``, else ``None``."""
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    if name == "Title":
        return 0
    if name.startswith("Heading"):
        digits = name[len("Heading") :].strip()
        return int(digits) if digits.isascii() and digits.isdigit() else 1
    return None


def _is_caption_paragraph(paragraph, text: str) -> bool:
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    return name == "Caption" or is_caption(text)


def _docx_rows(table) -> list[list[str]]:
    """A Word table's cell texts; a cell merged across columns is given once."""
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text)
        rows.append(cells)
    return rows


def _slide_title(slide) -> str:
    shape = slide.shapes.title
    return " ".join(shape.text_frame.text.split()) if shape is not None and shape.has_text_frame else ""


def _title_id(slide) -> int | None:
    shape = slide.shapes.title
    return shape.shape_id if shape is not None else None


def _shape_texts(shapes: Iterable[Any], skip: int | None) -> Iterator[str]:
    """The text of a slide's shapes (not its title), tables as Markdown, groups recursively."""
    for shape in shapes:
        if skip is not None and shape.shape_id == skip:
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            rows = [[c.text for c in row.cells] for row in shape.table.rows]
            yield markdown_table(rows)
        elif shape.shape_type is not None and int(shape.shape_type) == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _shape_texts(shape.shapes, skip)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            yield shape.text_frame.text


def _properties(props) -> dict[str, Any]:
    """The useful core properties (title, author, dates, subject, keywords) as metadata."""
    meta: dict[str, Any] = {}
    for attr, key in (
        ("title", "title"),
        ("author", "author"),
        ("creator", "author"),
        ("subject", "subject"),
        ("last_modified_by", "last_modified_by"),
        ("lastModifiedBy", "last_modified_by"),
        ("keywords", "tags"),
    ):
        value = getattr(props, attr, None)
        if isinstance(value, str) and value.strip() and key not in meta:
            meta[key] = " ".join(value.split())
    for attr, key in (("created", "date"), ("modified", "modified")):
        value = getattr(props, attr, None)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)  # OOXML stores them in UTC (W3CDTF); openpyxl drops the zone
        if isinstance(value, (datetime, date)):
            meta[key] = iso_datetime(value)
    if isinstance(meta.get("tags"), str):
        meta["tags"] = [t.strip() for t in meta["tags"].replace(";", ",").split(",") if t.strip()]
    return meta


def _value(v: Any) -> Any:
    """A cell's value as text: whole floats without ``.0``, dates in ISO 8601."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, datetime):
        return v.isoformat(sep=" ").removesuffix(" 00:00:00").removesuffix("T00:00:00")
    if isinstance(v, date):
        return v.isoformat()
    return v
