"""OpenDocument text (``.odt``, ``source_type="odt"``), read with the standard library and lxml.

An ``.odt`` file is a zip holding ``content.xml``, ``styles.xml`` and ``meta.xml``. Headings
(``text:h``, by their outline level) are structure; paragraphs, lists and tables (as Markdown
tables, a caption paragraph before one joining its heading path) are text, in document order. A
list is one block of Markdown list items, numbered as its list style says (``1.``, ``a)``, ``ii.``;
bullets and other formats ``- ``; a label that is not its number alone, ``2.1.`` for a level
showing the levels above it or ``Step 1:`` with a prefix, written as shown after a ``- ``), nested
lists indented under their item's text; a heading held in a list item (a numbered heading, as
writers save them) keeps its item's label in its text (``1. Introduction``), and so does a heading
numbered by the outline style (``text:outline-style``: ``1.2 Scope``, as Word headings). A footnote or
endnote is marked where it is cited by its citation (``[^1]``) and its text follows on a line of
its own (``[^1]: …``) at the end of the citing paragraph or list (after a table: a block of its
own), so a note is read in the section, and the chunk, of the sentence it qualifies. Metadata from
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
from .office import number_label
from .tables import is_caption, markdown_table

__all__ = ["extract_odt"]

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_T = "{" + _NS["text"] + "}"
_TB = "{" + _NS["table"] + "}"
_ST = "{" + _NS["style"] + "}"
_XML_ID = "{http://www.w3.org/XML/1998/namespace}id"


def extract_odt(source: Source) -> list[Document]:
    """An OpenDocument text as one document: headings → heading paths, tables → Markdown tables."""
    content, styles, meta_xml = _parts(source.content)
    body = content.find(".//office:body/office:text", _NS)
    if body is None:
        raise ExtractError("corrupt or unreadable OpenDocument file: no text body", hint=_HINT)
    roots = [content, *([styles] if styles is not None else [])]
    blocks = list(_blocks(body, _Lists(roots), _Outline(roots)))
    meta = _metadata(meta_xml) if meta_xml is not None else {}
    first_heading = next((b.heading_path[0] for b in blocks if b.heading_path), "")
    title = meta.get("title") or first_heading or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="odt", metadata=meta)]


_HINT = "open and save it again in LibreOffice, then ingest it again"


def _parts(data: bytes):
    """The parsed ``content.xml``, ``styles.xml`` and ``meta.xml`` (the last two ``None`` when absent)."""
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
            names = z.namelist()
            styles = etree.fromstring(z.read("styles.xml"), parser) if "styles.xml" in names else None
            meta = etree.fromstring(z.read("meta.xml"), parser) if "meta.xml" in names else None
            return content, styles, meta
    except ExtractError:
        raise
    except Exception as e:  # zipfile, a missing part, lxml
        raise ExtractError(
            f"corrupt or unreadable OpenDocument file: {str(e)[:200] or type(e).__name__}", hint=_HINT
        ) from e


def _blocks(body, lists: _Lists, outline: _Outline) -> Iterator[Block]:
    headings: list[tuple[int, str]] = []
    pending: str | None = None  # a caption paragraph that may belong to the next table
    for el, kind, within in _walk(body, lists):
        path = tuple(t for _, t in headings)
        notes: list[str] = []
        if kind == "table":
            text = markdown_table(_rows(el, notes))
            if text:
                yield Block(text, heading_path=(*path, pending) if pending else path)
            pending = None
            if notes:
                yield Block("\n".join(notes), heading_path=path)
            continue
        if kind == "list":
            lines = lists.lines(el, notes, within)
            if not lines:
                continue
            text = "\n".join(lines + notes)
        else:
            text = " ".join(_text(el, notes, mark=kind != "h").split())
            label = within if within is not None or kind != "h" else outline.label(el)
            if text and label and el.find(f"{_T}number") is None:  # an item's label; not when the writer gave it
                text = f"{label} {text}"
        if not text:
            continue
        if pending:
            yield Block(pending, heading_path=path)
            pending = None
        if kind == "h":
            level = int(el.get(f"{_T}outline-level") or 1)
            headings = [h for h in headings if h[0] < level] + [(level, text)]
            if notes:
                yield Block("\n".join(notes), heading_path=tuple(t for _, t in headings))
        elif kind == "p" and is_caption(text):
            pending = text
            if notes:
                yield Block("\n".join(notes), heading_path=path)
        else:
            yield Block("\n".join([text, *notes]) if kind == "p" else text, heading_path=path)
    if pending:
        yield Block(pending, heading_path=tuple(t for _, t in headings))


def _walk(el, lists: _Lists) -> Iterator[tuple[Any, str, Any]]:
    """Headings, paragraphs, lists and tables in document order, each with what it is read within
    (sections looked into; a list holding a heading or a table looked into too: ``_Lists.walk``)."""
    for child in el:
        tag = child.tag
        if tag == f"{_T}h":
            yield child, "h", None
        elif tag == f"{_T}p":
            yield child, "p", None
        elif tag == f"{_TB}table":
            yield child, "table", None
        elif tag == f"{_T}list":
            yield from lists.walk(child) if _holds_blocks(child) else [(child, "list", None)]
        elif isinstance(tag, str) and tag not in (f"{_T}note", f"{_T}tracked-changes"):
            yield from _walk(child, lists)


def _holds_blocks(el) -> bool:
    """Whether a list holds a heading or a table (read as blocks of their own, not as list items)."""
    return next(el.iter(f"{_T}h", f"{_TB}table"), None) is not None


class _Lists:
    """The lists of an OpenDocument text as Markdown list items, numbered as their list styles say.

    A list's style (``text:style-name``, an inner list taking its outer list's) is looked up in
    ``content.xml``'s automatic styles, then in ``styles.xml``; each level is a number format
    (``1``, ``a``, ``A``, ``i``, ``I``, with its suffix and start value) or a bullet. A list
    counts from its start unless it continues another (``text:continue-numbering``, or
    ``text:continue-list`` naming it); a level starts again after an item of a level above it. A
    level showing the numbers of the levels above it (``text:display-levels``) is labelled with
    them all (``2.1.``). A list holding headings (numbered headings, as writers save them) is read
    as blocks: each heading keeps its item's label in its text (``1. Introduction``).
    """

    def __init__(self, roots: list[Any]) -> None:
        self.styles: dict[str, dict[int, tuple[str, str, str, int, int]]] = {}
        for root in roots:
            for style in root.iter(f"{_T}list-style"):
                name = style.get(f"{_ST}name") or ""
                if name in self.styles:
                    continue  # content.xml's automatic styles come first
                self.styles[name] = _number_levels(style, f"{_T}list-level-style-number")
        self.last: dict[str, dict[int, int]] = {}  # the counters of the last list of each style
        self.by_id: dict[str, dict[int, int]] = {}

    def lines(self, el, notes: list[str], within: tuple[str, int, dict[int, int]] | None = None) -> list[str]:
        """A list's item lines (its notes' lines added to ``notes``); ``within``: the style, level and
        counters of the list it is nested in, when that one is read as blocks (``walk``)."""
        out: list[str] = []
        if within is not None:
            style, level, counters = within
            self._items(el, style, level, 0, counters, out, notes)
            return out
        style, counters = self._begin(el)
        self._items(el, style, 1, 0, counters, out, notes)
        return out

    def walk(self, el) -> Iterator[tuple[Any, str, Any]]:
        """A list holding headings or tables as ``_walk`` gives blocks: a heading with its item's label,
        a paragraph with its item's marker (``""`` when none), a table, an inner list of plain items
        with what it is in."""
        style, counters = self._begin(el)
        yield from self._blocks(el, style, 1, counters)

    def _blocks(self, el, style: str, level: int, counters: dict[int, int]) -> Iterator[tuple[Any, str, Any]]:
        for item in el:
            if item.tag not in (f"{_T}list-item", f"{_T}list-header"):
                continue
            mark, label = self._label(item, style, level, counters) if item.tag == f"{_T}list-item" else ("", "")
            for child in item:
                if child.tag == f"{_T}list":
                    inner = child.get(f"{_T}style-name") or style
                    if _holds_blocks(child):
                        yield from self._blocks(child, inner, level + 1, counters)
                    else:
                        yield child, "list", (inner, level + 1, counters)
                elif child.tag in (f"{_T}h", f"{_T}p"):
                    # a heading with its label as shown, a paragraph as a list item (``3. …``, ``- …``)
                    yield (child, "h", label) if child.tag == f"{_T}h" else (child, "p", mark.rstrip())
                    if "".join(_text(child).split()):
                        mark = label = ""  # an item's later paragraphs are not numbered
                elif child.tag == f"{_TB}table":
                    yield child, "table", None

    def _begin(self, el) -> tuple[str, dict[int, int]]:
        """A top-level list's style and counters (those of the list it continues)."""
        style = el.get(f"{_T}style-name") or ""
        counters: dict[int, int] = {}
        if el.get(f"{_T}continue-list"):
            counters = self.by_id.get(el.get(f"{_T}continue-list") or "", self.last.get(style, counters))
        elif el.get(f"{_T}continue-numbering") == "true":
            counters = self.last.get(style, counters)
        self.last[style] = counters
        if el.get(_XML_ID):
            self.by_id[el.get(_XML_ID)] = counters
        return style, counters

    def _label(self, item, style: str, level: int, counters: dict[int, int]) -> tuple[str, str]:
        """An item's Markdown marker (``2. ``, ``- ``) and its label as shown (``1.2.``, ``""`` for a
        bullet); its level's counter moved on."""
        levels = self.styles.get(style, {})
        fmt, prefix, suffix, start, shown = levels.get(level, ("", "", ".", 1, 1))
        if item.get(f"{_T}start-value"):
            counters[level] = _int(item.get(f"{_T}start-value"), 1) - 1
        n = counters[level] = counters.get(level, start - 1) + 1
        for deeper in [k for k in counters if k > level]:
            del counters[deeper]
        own = number_label(_FORMATS.get(fmt, ""), n)
        if own is None:
            return "- ", ""

        def number(k: int) -> str:
            f, _, _, first, _ = levels.get(k, ("1", "", "", 1, 1))
            m = counters.get(k, first)
            return number_label(_FORMATS.get(f, ""), m) or str(m)

        label = (prefix + ".".join(number(k) for k in range(max(1, level - shown + 1), level + 1)) + suffix).strip()
        if shown > 1 or prefix.strip() or suffix.strip() not in ("", ".", ")"):
            return "- " + label + " ", label  # not a Markdown marker: written as shown, after one
        return own + (")" if suffix.strip() == ")" else ".") + " ", label

    def _items(self, el, style: str, level: int, indent: int, counters, out: list[str], notes: list[str]) -> None:
        for item in el:
            if item.tag not in (f"{_T}list-item", f"{_T}list-header"):
                continue
            mark = self._label(item, style, level, counters)[0] if item.tag == f"{_T}list-item" else ""
            width = 2 if mark.startswith("- ") else len(mark)  # where the item's text starts for Markdown
            first = True
            for child in item:
                if child.tag == f"{_T}list":
                    inner = child.get(f"{_T}style-name") or style
                    self._items(child, inner, level + 1, indent + width, counters, out, notes)
                elif child.tag in (f"{_T}p", f"{_T}h"):
                    text = " ".join(_text(child, notes).split())
                    if text:
                        out.append(" " * indent + (mark if first else " " * width) + text)
                        first = False


def _number_levels(style, tag: str) -> dict[int, tuple[str, str, str, int, int]]:
    """A list or outline style's numbered levels (its children ``tag``): format, prefix, suffix,
    start value and how many levels a label shows, by level."""
    levels: dict[int, tuple[str, str, str, int, int]] = {}
    for lvl in style:
        if lvl.tag == tag:
            levels[_int(lvl.get(f"{_T}level"), 1)] = (
                lvl.get(f"{_ST}num-format") or "",
                lvl.get(f"{_ST}num-prefix") or "",
                lvl.get(f"{_ST}num-suffix") or "",
                _int(lvl.get(f"{_T}start-value"), 1),
                _int(lvl.get(f"{_T}display-levels"), 1),
            )
    return levels


class _Outline:
    """The numbers the outline style (``text:outline-style``, in ``styles.xml``) gives headings
    that are not in a list: each level's format, prefix, suffix, start and the levels it shows
    (``text:display-levels``), counted over the document's headings; a level starts again after a
    heading of a level above it. A heading kept out of the numbering (``text:is-list-header``) is
    not counted; one restarting it (``text:restart-numbering``) starts at its ``text:start-value``.
    A level without a number format (LibreOffice's default) gives no label."""

    def __init__(self, roots: list[Any]) -> None:
        self.levels: dict[int, tuple[str, str, str, int, int]] = {}
        for root in roots:
            style = next(root.iter(f"{_T}outline-style"), None)
            if style is not None:
                self.levels = _number_levels(style, f"{_T}outline-level-style")
                break
        self.counters: dict[int, int] = {}

    def label(self, heading) -> str:
        """A heading's label as shown (``1.2``; its level's counter moved on), ``""`` for none."""
        level = _int(heading.get(f"{_T}outline-level"), 1)
        if not self.levels or heading.get(f"{_T}is-list-header") == "true":
            return ""
        fmt, prefix, suffix, start, shown = self.levels.get(level, ("", "", "", 1, 1))
        if heading.get(f"{_T}restart-numbering") == "true":
            self.counters[level] = _int(heading.get(f"{_T}start-value"), start) - 1
        n = self.counters[level] = self.counters.get(level, start - 1) + 1
        for deeper in [k for k in self.counters if k > level]:
            del self.counters[deeper]
        if number_label(_FORMATS.get(fmt, ""), n) is None:
            return ""
        numbers = []
        for k in range(max(1, level - shown + 1), level + 1):
            f, _, _, first, _ = self.levels.get(k, ("", "", "", 1, 1))
            m = self.counters.get(k, first)
            if (shown_k := number_label(_FORMATS.get(f, ""), m)) is not None:
                numbers.append(shown_k)
        return (prefix + ".".join(numbers) + suffix).strip()


#: OpenDocument's number formats in Word's names (``kbctl.extract.office.number_label``).
_FORMATS = {"1": "decimal", "a": "lowerLetter", "A": "upperLetter", "i": "lowerRoman", "I": "upperRoman"}


def _int(text: str | None, default: int) -> int:
    try:
        return int(text or "")
    except ValueError:
        return default


def _rows(table, notes: list[str]) -> list[list[str]]:
    rows = []
    for row in table.iter(f"{_TB}table-row"):
        cells = []
        for cell in row:
            if cell.tag != f"{_TB}table-cell":
                continue
            text = " ".join(" ".join(_text(p, notes).split()) for p in cell.iter(f"{_T}p") if _outside_notes(p, cell))
            repeat = min(int(cell.get(f"{_TB}number-columns-repeated") or 1), 64)
            cells += [text] * (repeat if text else 1)
        rows.append(cells)
    return rows


def _outside_notes(p, cell) -> bool:
    """Whether a paragraph found in a table cell is not a note's (a note's text is read with its citation)."""
    for ancestor in p.iterancestors():
        if ancestor is cell:
            return True
        if ancestor.tag == f"{_T}note":
            return False
    return True


def _text(el, notes: list[str] | None = None, *, mark: bool = True) -> str:
    """An element's text with ``text:s`` (spaces), ``text:tab`` and ``text:line-break`` as whitespace.

    A note (``text:note``) is left out of the text; given ``notes``, it is marked by its citation
    (``[^1]``, unless ``mark`` is false: a heading) and its line (``[^1]: its text``) added to ``notes``.
    """
    parts = [el.text or ""]
    for child in el:
        if child.tag == f"{_T}s":
            parts.append(" " * int(child.get(f"{_T}c") or 1))
        elif child.tag in (f"{_T}tab", f"{_T}line-break"):
            parts.append(" ")
        elif child.tag == f"{_T}note":
            if notes is not None:
                parts.append(_note(child, notes, mark))
        elif isinstance(child.tag, str) and child.tag != f"{_T}tracked-changes":
            parts.append(_text(child, notes, mark=mark))
        parts.append(child.tail or "")
    return "".join(parts)


def _note(note, notes: list[str], mark: bool) -> str:
    """The marker of a note (``[^citation]``), its line added to ``notes``; ``""`` for an empty one."""
    body = note.find(f"{_T}note-body")
    text = " ".join(" ".join(_text(p).split()) for p in body.iter(f"{_T}p", f"{_T}h")) if body is not None else ""
    if not text.strip():
        return ""
    citation = note.find(f"{_T}note-citation")
    label = "".join((citation.text or "").split()) if citation is not None else ""
    label = label or str(len(notes) + 1)
    notes.append(f"[^{label}]: {text}")
    return f"[^{label}]" if mark else ""


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
