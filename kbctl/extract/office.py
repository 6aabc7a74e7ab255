"""Office documents: Word (``.docx``), PowerPoint (``.pptx``) and Excel (``.xlsx``) files.

Read with python-docx, python-pptx and openpyxl (imported only when such a file comes):

- **Word** (``source_type="docx"``): paragraphs in document order; ``Title`` and ``Heading N``
  paragraphs are structure (the ``heading_path`` of what follows, not text); tables become
  Markdown tables (``kbctl.extract.tables``), a caption paragraph just before or after one
  ("Table 2: …", or the ``Caption`` style) joining its heading path. Consecutive numbered or
  bulleted paragraphs are one block of Markdown list items (``1.``, ``a)``, ``iv.``, ``- ``,
  nested levels indented; ``1.2.`` where a level's text names several levels), numbered from
  ``word/numbering.xml`` as Word counts; a label with other text than its number (``Step 1:``)
  follows a ``- `` marker, as Word shows it. A numbered heading keeps its label in its text (``1.2
  Scope``) and a list paragraph in a table cell its marker (``1. drain 2. promote › a) check``, a
  ``›`` for each level it is nested below the cell's first). A footnote or
  endnote (``word/footnotes.xml``, ``word/endnotes.xml``, which python-docx does not read) is
  marked where it is cited (``[^1]``; endnotes ``[^i]``) and its text follows on a line of its
  own (``[^1]: …``) at the end of the citing paragraph or list (after a table: a block of its
  own): a note is read in the section, and the chunk, of the sentence it qualifies.
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
import re
import zipfile
from datetime import UTC, date, datetime
from typing import Any, Callable, Iterable, Iterator

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, stem_of
from .tables import is_caption, markdown_table

__all__ = ["extract_docx", "extract_pptx", "extract_xlsx", "OLE_MAGIC", "number_label"]

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
    """The paragraphs, lists and tables of a Word document in order, under the headings above them.

    Consecutive list paragraphs are one block of Markdown list items (``_DocxNumbering``); a
    footnote or endnote is marked where it is cited (``[^1]``) and its text follows on a line of
    its own (``[^1]: …``) at the end of the citing paragraph or list, or in a block after a table.
    """
    from docx.table import Table

    notes = _DocxNotes(doc)
    numbering = _DocxNumbering(doc)
    headings: list[tuple[int, str]] = []
    pending: Block | None = None  # a caption paragraph that may belong to the next table
    last_table: Block | None = None
    items: list[str] = []  # the list being read: its item lines, then its notes
    items_notes: list[str] = []
    open_levels: list[tuple[int, int]] = []  # (level, indent of its text) of the list's items above

    def end_list() -> Iterator[Block]:
        if items:
            yield Block("\n".join(items + items_notes), heading_path=tuple(t for _, t in headings))
        items.clear()
        items_notes.clear()
        open_levels.clear()

    for item in doc.iter_inner_content():
        if isinstance(item, Table):
            yield from end_list()
            path = tuple(t for _, t in headings)
            caption = pending.text if pending else None
            pending = None
            text = markdown_table(_docx_rows(item, notes, numbering))
            last_table = Block(text, heading_path=(*path, caption) if caption else path) if text else None
            if last_table:
                yield last_table
            if cited := notes.take():
                yield Block("\n".join(cited), heading_path=path)
            continue
        level = _heading_level(item)
        marker = numbering.marker(item) if level is None else None
        label = numbering.label(item) if level is not None else None  # Word's "1.2 " of a numbered heading
        text = _docx_text(item._p, notes).strip()
        if label and text:
            text = label + text
        cited = notes.take()
        if marker is not None:
            if text:
                if pending:
                    yield pending
                    pending = None
                depth, mark, shown = marker
                while open_levels and open_levels[-1][0] >= depth:
                    open_levels.pop()
                indent = open_levels[-1][1] if open_levels else 0
                line = mark + shown + text.replace("\n", "\n" + " " * (indent + len(mark)))
                items.append(" " * indent + line)
                items_notes.extend(cited)
                open_levels.append((depth, indent + len(mark)))
                last_table = None
            continue
        if not text:
            continue
        yield from end_list()
        if pending:
            yield pending
            pending = None
        path = tuple(t for _, t in headings)
        if level is not None:
            headings = [h for h in headings if h[0] < level] + [(level, text)]
            if cited:
                yield Block("\n".join(cited), heading_path=tuple(t for _, t in headings))
        elif _is_caption_paragraph(item, text):
            if last_table is not None and len(last_table.heading_path) == len(path):
                # a caption below the table: said again as the table's own line, not lost
                yield Block("\n".join([text, *cited]), heading_path=path)
            else:
                pending = Block(text, heading_path=path)
                if cited:
                    yield Block("\n".join(cited), heading_path=path)
        else:
            yield Block("\n".join([text, *cited]), heading_path=path)
        last_table = None
    yield from end_list()
    if pending:
        yield pending


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
#: What a run holds that is text: python-docx's ``Run.text``, plus the note references.
_RUN_TEXT = "w:br | w:cr | w:noBreakHyphen | w:ptab | w:t | w:tab | w:footnoteReference | w:endnoteReference"


def _docx_text(p, notes: _DocxNotes) -> str:
    """A paragraph's text as python-docx reads it, with ``[^N]`` where a note is cited."""
    if not p.xpath("./w:r/w:footnoteReference | ./w:r/w:endnoteReference | ./w:hyperlink/w:r/w:footnoteReference"):
        return p.text
    parts = []
    for el in p.xpath("w:r | w:hyperlink/w:r"):
        for child in el.xpath(_RUN_TEXT):
            if child.tag in (f"{_W}footnoteReference", f"{_W}endnoteReference"):
                parts.append(notes.cite(child.tag[len(_W) : -len("Reference")], child.get(f"{_W}id")))
            else:
                parts.append(str(child))
    return "".join(parts)


def _part_xml(doc, reltype: str):
    """The parsed XML of the document's part related by ``reltype`` (notes, numbering), or ``None``."""
    from lxml import etree

    for rel in doc.part.rels.values():
        if rel.reltype == reltype and not rel.is_external:
            part = rel.target_part
            element = getattr(part, "element", None)  # a part python-docx parsed (numbering)
            if element is not None:
                return element
            parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
            return etree.fromstring(part.blob, parser)
    return None


class _DocxNotes:
    """A Word document's footnotes and endnotes, labelled as Word shows them by default: footnotes
    ``1, 2, 3`` and endnotes ``i, ii, iii`` in the order they are cited (the separator "notes" are
    not notes)."""

    def __init__(self, doc) -> None:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        self.text: dict[tuple[str, str], str] = {}
        for kind, reltype in (("footnote", RT.FOOTNOTES), ("endnote", RT.ENDNOTES)):
            root = _part_xml(doc, reltype)
            if root is None:
                continue
            for note in root.iter(f"{_W}{kind}"):
                if note.get(f"{_W}type") in ("separator", "continuationSeparator", "continuationNotice"):
                    continue
                paragraphs = ("".join(t.text or "" for t in p.iter(f"{_W}t")) for p in note.iter(f"{_W}p"))
                text = " ".join(" ".join(paragraphs).split())
                if text:
                    self.text[(kind, note.get(f"{_W}id") or "")] = text
        self.labels: dict[tuple[str, str], str] = {}
        self.counts = {"footnote": 0, "endnote": 0}
        self.cited: list[str] = []

    def cite(self, kind: str, note_id: str | None) -> str:
        """The marker of a citation (``[^2]``), its note's line kept for ``take``; ``""`` for no note."""
        key = (kind, note_id or "")
        if key not in self.text:
            return ""
        if key not in self.labels:
            self.counts[kind] += 1
            n = self.counts[kind]
            self.labels[key] = str(n) if kind == "footnote" else _roman(n).lower()
            self.cited.append(f"[^{self.labels[key]}]: {self.text[key]}")
        return f"[^{self.labels[key]}]"

    def take(self) -> list[str]:
        """The lines of the notes cited since the last call."""
        lines, self.cited = self.cited, []
        return lines


class _DocxNumbering:
    """The list markers Word shows before numbered and bulleted paragraphs, as Markdown list items.

    A paragraph's ``w:numPr`` (its own or its style's: ``List Number``, ``List Bullet``, a
    ``Heading N`` of an outline-numbered document) names a ``w:num`` and a level; the ``w:num``'s
    ``w:abstractNum`` gives the level's format (an abstract list that only links to a numbering
    style, ``w:numStyleLink``, takes the levels of the one defining it, ``w:styleLink``, or of the
    list that style's own ``w:numPr`` in ``styles.xml`` names). Counters run per abstract list, as
    in Word (two ``w:num`` over one list continue each other's numbers), unless a ``w:num``
    restarts a level (``w:startOverride``, Word's "restart numbering"); a level starts again after
    an item of a level above it, or as its ``w:lvlRestart`` says (after an item of that level or
    one above it; ``0``: never). ``decimal``, letters and roman numerals are numbered; a level
    whose text is its own number alone (``%1``, ``%1.``, ``%1)``) is a Markdown marker (``1.``,
    ``a)``), bullets and any other format are ``- ``, and any other text (``Step %1:``, ``(%1)``,
    ``%1.%2.``) is written as Word shows it after a ``- `` marker (``- Step 1: …``), so that
    Markdown still reads one list item per paragraph. The level's suffix (``w:suff``) is a space
    after such a label (a tab too: Markdown keeps no tabs), nothing when it is ``nothing``. A
    heading keeps its level's text as Word shows it, and its suffix (``1.2 Scope``, ``Chapter 1
    Results``).
    """

    def __init__(self, doc) -> None:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        root = _part_xml(doc, RT.NUMBERING)
        self.abstract: dict[str, dict[int, Any]] = {}
        self.nums: dict[str, tuple[str, dict[int, Any], dict[int, int]]] = {}
        self.styles: dict[str, dict[str, int]] = {}  # abstract list → paragraph style → its level
        if root is not None:
            defines: dict[str, str] = {}  # numbering style → the abstract list defining it
            links: dict[str, str] = {}  # abstract list → the numbering style it takes its levels from
            for a in root.iter(f"{_W}abstractNum"):
                aid = a.get(f"{_W}abstractNumId") or ""
                self.abstract[aid] = {_int(lvl.get(f"{_W}ilvl")): lvl for lvl in a.iter(f"{_W}lvl")}
                self.styles[aid] = {
                    ps.get(f"{_W}val") or "": _int(lvl.get(f"{_W}ilvl"))
                    for lvl in a.iter(f"{_W}lvl")
                    if (ps := lvl.find(f"{_W}pStyle")) is not None
                }
                if (el := a.find(f"{_W}styleLink")) is not None:
                    defines.setdefault(el.get(f"{_W}val") or "", aid)
                if (el := a.find(f"{_W}numStyleLink")) is not None:
                    links[aid] = el.get(f"{_W}val") or ""
            for num in root.iter(f"{_W}num"):
                ref = num.find(f"{_W}abstractNumId")
                levels, starts = {}, {}
                for o in num.iter(f"{_W}lvlOverride"):
                    ilvl = _int(o.get(f"{_W}ilvl"))
                    if (lvl := o.find(f"{_W}lvl")) is not None:
                        levels[ilvl] = lvl
                    if (so := o.find(f"{_W}startOverride")) is not None:
                        starts[ilvl] = _int(so.get(f"{_W}val"), 1)
                aid = ref.get(f"{_W}val") or "" if ref is not None else ""
                self.nums[num.get(f"{_W}numId") or ""] = (aid, levels, starts)
            # a list linked to a numbering style is that style's list: its levels and its counters;
            # the style is defined by the abstract list naming it (w:styleLink), else by the list its
            # own w:numPr in styles.xml names
            style_nums = _numbering_styles(doc) if any(style not in defines for style in links.values()) else {}
            for num_id, (aid, levels, starts) in self.nums.items():
                if aid in links:
                    style = links[aid]
                    target = defines.get(style)
                    if target is None and style_nums.get(style) in self.nums:
                        target = self.nums[style_nums[style]][0]
                    if target is not None and target not in links:
                        self.nums[num_id] = (target, levels, starts)
        self.counters: dict[str, dict[int, int]] = {}
        self.restarted: set[tuple[str, int]] = set()

    def marker(self, paragraph) -> tuple[int, str, str] | None:
        """``(level, "2. ", "")`` for a list paragraph (its counter moved on), ``None`` for another:
        the Markdown marker, then the label written after it as Word shows it with its suffix
        (``(level, "- ", "Step 2: ")`` for a level's text that is not its number alone)."""
        numbered = self._count(paragraph)
        if numbered is None:
            return None
        ilvl, own, full, plain, suffix = numbered
        if own is None:
            return ilvl, "- ", ""
        if plain is not None:
            return ilvl, own + plain + " ", ""
        return ilvl, "- ", full + suffix if full else ""

    def label(self, paragraph) -> str | None:
        """A numbered heading's label as Word shows it with its suffix (``1.2 ``; its counter moved
        on), else ``None``."""
        numbered = self._count(paragraph)
        if numbered is None or numbered[1] is None or not numbered[2]:
            return None
        return numbered[2] + numbered[4]

    def _count(self, paragraph) -> tuple[int, str | None, str, str | None, str] | None:
        """A numbered paragraph's level, its own number (``None``: a bullet), its level's text filled
        in, the Markdown marker's end (``.``, ``)``) when that text is its own number alone (else
        ``None``) and what follows the label (its ``w:suff``: a space, or nothing); ``None`` for a
        paragraph not numbered."""
        if not self.nums:
            return None
        num_id, ilvl, style_id = self._num_pr(paragraph)
        if num_id is None or num_id not in self.nums:
            return None  # numId 0 (numbering removed) is in no w:num
        aid, overrides, starts = self.nums[num_id]
        if ilvl is None:
            ilvl = self.styles.get(aid, {}).get(style_id or "", 0)
        abstract = self.abstract.get(aid, {})

        def level(k: int):
            return overrides.get(k) if k in overrides else abstract.get(k)

        lvl = level(ilvl)
        counts = self.counters.setdefault(aid, {})
        if ilvl in starts and (num_id, ilvl) not in self.restarted:
            self.restarted.add((num_id, ilvl))
            counts[ilvl] = starts[ilvl] - 1
        counts[ilvl] = counts.get(ilvl, _int(_val(lvl, "start"), 1) - 1) + 1
        for deeper in [k for k in counts if k > ilvl]:
            # w:lvlRestart: the (1-based) level after whose items this one restarts; 0: never
            restart = _val(level(deeper), "lvlRestart")
            if ilvl < (_int(restart, deeper) if restart else deeper):
                del counts[deeper]
        legal = lvl is not None and lvl.find(f"{_W}isLgl") is not None  # every level in decimal

        def number(k: int) -> str:
            other = level(k)
            n = counts.get(k, _int(_val(other, "start"), 1))  # a level not reached yet shows its start
            return number_label("decimal" if legal else _val(other, "numFmt"), n) or str(n)

        own = number_label("decimal" if legal else _val(lvl, "numFmt"), counts[ilvl])
        text = _val(lvl, "lvlText")
        alone = re.fullmatch(rf"\s*%{ilvl + 1}([.)]?)\s*", text)
        plain = (")" if alone.group(1) == ")" else ".") if alone else None
        filled = _LEVEL_REF.sub(lambda m: number(int(m.group(1)) - 1), text)
        # Word's default suffix is a tab: a space in Markdown; "nothing" joins the label to the text
        joined = _val(lvl, "suff") == "nothing" and not filled[-1:].isspace()
        return ilvl, own, filled.strip(), plain, "" if joined else " "

    def _num_pr(self, paragraph) -> tuple[str | None, int | None, str | None]:
        """The paragraph's numbering (``numId``, ``ilvl``) as given on it or on its style, and its style's id."""
        style = paragraph.style
        style_id = style.style_id if style is not None else None
        num_id: str | None = None
        ilvl: int | None = None
        candidates = [paragraph._p]
        for _ in range(16):  # a style's base styles, with a bound against a loop
            if style is None:
                break
            candidates.append(style.element)
            style = style.base_style
        for el in candidates:
            pr = el.find(f"{_W}pPr/{_W}numPr")
            if pr is None:
                continue
            nid, lv = pr.find(f"{_W}numId"), pr.find(f"{_W}ilvl")
            if num_id is None and nid is not None:
                num_id = nid.get(f"{_W}val")
            if ilvl is None and lv is not None:
                ilvl = _int(lv.get(f"{_W}val"))
            if num_id is not None:
                break
        return num_id, ilvl, style_id


def _numbering_styles(doc) -> dict[str, str]:
    """The numbering styles of ``styles.xml`` (``w:type="numbering"``) by id → the ``w:numId`` of
    their ``w:pPr/w:numPr``: the list a ``w:numStyleLink`` to them means when no abstract list
    defines them (``w:styleLink``)."""
    out: dict[str, str] = {}
    try:
        root = doc.styles.element
    except Exception:  # no styles part: nothing to follow
        return out
    for style in root.iter(f"{_W}style"):
        if style.get(f"{_W}type") != "numbering":
            continue
        nid = style.find(f"{_W}pPr/{_W}numPr/{_W}numId")
        if nid is not None and nid.get(f"{_W}val"):
            out[style.get(f"{_W}styleId") or ""] = nid.get(f"{_W}val") or ""
    return out


#: A level named in a level's text (``%1`` … ``%9``).
_LEVEL_REF = re.compile(r"%([1-9])")


def _val(el, tag: str) -> str:
    """The ``w:val`` of ``el``'s child ``tag``, ``""`` when either is missing."""
    child = el.find(f"{_W}{tag}") if el is not None else None
    return (child.get(f"{_W}val") or "") if child is not None else ""


def _int(text: str | None, default: int = 0) -> int:
    try:
        return int(text or "")
    except ValueError:
        return default


def number_label(fmt: str, n: int) -> str | None:
    """``n`` written in a numbering format (``decimal``, letters, roman), ``None`` for a bullet or another."""
    if fmt == "decimal":
        return str(n)
    if fmt == "decimalZero":
        return f"{n:02d}"
    if fmt in ("lowerLetter", "upperLetter"):
        letters = chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1)  # Word: a … z, aa … zz, aaa
        return letters if fmt == "lowerLetter" else letters.upper()
    if fmt in ("lowerRoman", "upperRoman"):
        return _roman(n).lower() if fmt == "lowerRoman" else _roman(n)
    return None


def _roman(n: int) -> str:
    if n <= 0 or n >= 4000:
        return str(n)
    out = []
    for value, numeral in (
        (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
        (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
    ):  # fmt: skip
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


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


def _docx_rows(table, notes: _DocxNotes, numbering: _DocxNumbering) -> list[list[str]]:
    """A Word table's cell texts (``[^N]`` where a note is cited, a list paragraph's marker before its
    text: ``1. drain 2. promote``, counted with its list; an item nested below the cell's first level
    marked by one ``›`` a level: ``2. promote › a) check the lag``, as a row is one line); a cell
    merged across columns is given once."""
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            texts = []
            open_levels: list[int] = []
            for p in cell.paragraphs:
                marker, text = numbering.marker(p), _docx_text(p._p, notes)
                if marker is None or not text.strip():
                    texts.append(text)
                    continue
                depth, mark, shown = marker
                while open_levels and open_levels[-1] >= depth:
                    open_levels.pop()
                nested = "›" * len(open_levels) + " " if open_levels else ""
                open_levels.append(depth)
                texts.append(nested + mark + shown + text.strip())
            cells.append("\n".join(texts))
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
