"""OpenDocument text (``.odt``, ``source_type="odt"``), read with the standard library and lxml.

An ``.odt`` file is a zip holding ``content.xml`` and ``meta.xml``. Headings (``text:h``, by their
outline level) are structure; paragraphs, list items and tables (as Markdown tables, a caption
paragraph before one joining its heading path) are text, in document order. Metadata from
``meta.xml``: ``title``, ``author`` (the creator), ``date`` (created), ``modified``, ``subject``,
``tags`` (keywords). A password-protected file ("encrypted OpenDocument file") or one that does
not read ("corrupt or unreadable OpenDocument file") is an ``ExtractError``.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any, Iterator

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, stem_of
from .tables import is_caption, markdown_table

__all__ = ["extract_odt"]

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_T = "{" + _NS["text"] + "}"
_TB = "{" + _NS["table"] + "}"


def extract_odt(source: Source) -> list[Document]:
    """An OpenDocument text as one document: headings → heading paths, tables → Markdown tables."""
    content, meta_xml = _parts(source.content)
    body = content.find(".//office:body/office:text", _NS)
    if body is None:
        raise ExtractError("corrupt or unreadable OpenDocument file: no text body", hint=_HINT)
    blocks = list(_blocks(body))
    meta = _metadata(meta_xml) if meta_xml is not None else {}
    first_heading = next((b.heading_path[0] for b in blocks if b.heading_path), "")
    title = meta.get("title") or first_heading or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="odt", metadata=meta)]


_HINT = "open and save it again in LibreOffice, then ingest it again"


def _parts(data: bytes):
    """The parsed ``content.xml`` and ``meta.xml`` (``None`` when absent)."""
    from lxml import etree

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            manifest = z.read("META-INF/manifest.xml") if "META-INF/manifest.xml" in z.namelist() else b""
            if b"encryption-data" in manifest:
                raise ExtractError(
                    "encrypted OpenDocument file (password required)", hint="save it again without a password"
                )
            parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
            content = etree.fromstring(z.read("content.xml"), parser)
            meta = etree.fromstring(z.read("meta.xml"), parser) if "meta.xml" in z.namelist() else None
            return content, meta
    except ExtractError:
        raise
    except Exception as e:  # zipfile, a missing part, lxml
        raise ExtractError(
            f"corrupt or unreadable OpenDocument file: {str(e)[:200] or type(e).__name__}", hint=_HINT
        ) from e


def _blocks(body) -> Iterator[Block]:
    headings: list[tuple[int, str]] = []
    pending: str | None = None  # a caption paragraph that may belong to the next table
    for el, kind in _walk(body):
        path = tuple(t for _, t in headings)
        if kind == "table":
            text = markdown_table(_rows(el))
            if text:
                yield Block(text, heading_path=(*path, pending) if pending else path)
            pending = None
            continue
        text = " ".join(_text(el).split())
        if not text:
            continue
        if pending:
            yield Block(pending, heading_path=path)
            pending = None
        if kind == "h":
            level = int(el.get(f"{_T}outline-level") or 1)
            headings = [h for h in headings if h[0] < level] + [(level, text)]
        elif is_caption(text):
            pending = text
        else:
            yield Block(text, heading_path=path)
    if pending:
        yield Block(pending, heading_path=tuple(t for _, t in headings))


def _walk(el) -> Iterator[tuple[Any, str]]:
    """Headings, paragraphs and tables in document order (lists and sections looked into)."""
    for child in el:
        tag = child.tag
        if tag == f"{_T}h":
            yield child, "h"
        elif tag == f"{_T}p":
            yield child, "p"
        elif tag == f"{_TB}table":
            yield child, "table"
        elif isinstance(tag, str):
            yield from _walk(child)


def _rows(table) -> list[list[str]]:
    rows = []
    for row in table.iter(f"{_TB}table-row"):
        cells = []
        for cell in row:
            if cell.tag != f"{_TB}table-cell":
                continue
            text = " ".join(" ".join(_text(p).split()) for p in cell.iter(f"{_T}p"))
            repeat = min(int(cell.get(f"{_TB}number-columns-repeated") or 1), 64)
            cells += [text] * (repeat if text else 1)
        rows.append(cells)
    return rows


def _text(el) -> str:
    """An element's text with ``text:s`` (spaces), ``text:tab`` and ``text:line-break`` as whitespace."""
    parts = [el.text or ""]
    for child in el:
        if child.tag == f"{_T}s":
            parts.append(" " * int(child.get(f"{_T}c") or 1))
        elif child.tag in (f"{_T}tab", f"{_T}line-break"):
            parts.append(" ")
        elif isinstance(child.tag, str) and child.tag not in (f"{_T}note", f"{_T}tracked-changes"):
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _metadata(meta_xml) -> dict[str, Any]:
    from datetime import datetime

    out: dict[str, Any] = {}
    for path, key in (
        ("dc:title", "title"),
        ("meta:initial-creator", "author"),
        ("dc:creator", "author"),
        ("dc:subject", "subject"),
    ):
        el = meta_xml.find(f".//office:meta/{path}", _NS)
        if el is not None and (el.text or "").strip() and key not in out:
            out[key] = " ".join(el.text.split())
    for path, key in (("meta:creation-date", "date"), ("dc:date", "modified")):
        el = meta_xml.find(f".//office:meta/{path}", _NS)
        if el is not None and el.text:
            try:
                dt = datetime.fromisoformat(el.text.strip())
            except ValueError:
                continue
            out[key] = iso_datetime(dt)  # LibreOffice writes local time without a zone: kept so
    tags = [" ".join((k.text or "").split()) for k in meta_xml.findall(".//office:meta/meta:keyword", _NS)]
    if any(tags):
        out["tags"] = [t for t in tags if t]
    return out
