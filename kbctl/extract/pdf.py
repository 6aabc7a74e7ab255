"""PDF files (``source_type="pdf"``), read with pdfplumber.

Keeps the text of every page, split into paragraphs where the vertical gap between two lines is
clearly larger than the usual line spacing; every block has its 1-based ``page``. Ruled tables
(pdfplumber's table finder, run only on pages that draw lines or rectangles) become Markdown tables
in their place, the caption or short line above one as its heading path. Running headers and
footers (a paragraph of one to three short lines repeated at the top or bottom of most pages, its
page number aside) are dropped. A page of two or three columns is read column by column, band by
band around its full-width lines (a title, a caption, a paragraph across the page), each band at its
own gutters (``_regions``); an unruled table of short cells or a monospaced listing stays line by
line. A word hyphenated at a line's end is joined, a URL's or a path's hyphen kept, and so is a
hyphen after a word in capitals (``TCP/IP-based``); a URL or a path broken after a ``/`` or a ``.``
is joined when the next line goes on with it (``dehyphenate``).

A page that holds an image but no usable text (no characters, or mostly glyph codes and symbols
that are not text) is read with OCR (``kbctl.extract.ocr``) when the ``kbctl[ocr]`` extra is
installed and ``[extract] ocr = "auto"``; nothing of this runs for pages that have text. Pages read
so are listed in ``ocr_pages`` with their mean ``ocr_confidence``; a page under
``ocr_min_confidence`` is an ``OcrWarning`` note, and so are scanned pages left unread (OCR off or
not installed) in a PDF that has text elsewhere.

Metadata: ``page_count``, and from the PDF's info dictionary ``pdf_title``, ``author``, ``date``
(the creation date, ISO 8601), ``subject`` and ``tags`` (its keywords). Title: the info ``Title``,
else the first line of page 1 (when shorter than 120 characters), else the file's stem.

Errors: a PDF pdfplumber cannot open or read is "corrupt or unreadable PDF"; an encrypted one is
"encrypted PDF (password required)"; one without any text (a scan, OCR off, not installed or
finding nothing) is "no extractable text in PDF", with a hint.
"""

from __future__ import annotations

import io
import logging
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from statistics import median
from typing import Any

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, stem_of
from .ocr import OCR_HINT
from .options import ExtractOptions
from .tables import is_caption, markdown_table, table_header

__all__ = ["extract_pdf", "pdf_date", "drop_running_lines"]

log = logging.getLogger(__name__)

_TITLE_MAX = 120
# Two characters further apart than this fraction of the font size are two words: pdfplumber's
# default (3 points, whatever the size) runs the words of pdfTeX documents together, which
# position words by gaps rather than space characters ("Thisisversion0.21").
_X_TOLERANCE = 0.15
_CID = re.compile(r"\(cid:\d+\)")
_GUTTER = 8.0  # the narrowest gap between two columns of text, in points (words are about 3 apart)
_NUMBER = re.compile(r"(?<!\d)\d{1,5}(?!\d)")
_HYPHEN_END = re.compile(r"[^\W\d_][-\u00ad\u2010]$")  # a letter, then a hyphen (or a soft one) ending the line
_TRAILING = ".,;:!?)]}'\"»”’"  # what ends a sentence or a bracket after a URL or a path
# what makes the first word of a line the rest of an address broken after a "/": a path of its own,
# a query, or a file's extension (not "and", not "e.g.")
_GOES_ON = re.compile(r"/|[?#=&_%~]|\.[A-Za-z]{2,}")
_PUNCT = frozenset(".,;:!?'\"()[]{}<>-–—/\\|@#$%&*+=_~^`’“”‘«»…°€£§")
_PDF_DATE = re.compile(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*(Z|[+-]\d{2}'?\d{2}'?)?")


def extract_pdf(source: Source, options: ExtractOptions | None = None) -> list[Document]:
    """A PDF as one document, with one or more blocks per page."""
    options = options or ExtractOptions()
    info, pages, where, scans, ocr = _read(source.content, options)
    if not pages:
        raise _pdf_error(ValueError("the document has no pages"))
    pages = drop_running_lines(pages)
    blocks = [
        Block(p, page=n, heading_path=_table_path(ps, i), boxes=where[n - 1].get(p, ()))
        for n, ps in enumerate(pages, 1)
        for i, p in enumerate(ps)
    ]
    if not blocks:
        raise ExtractError(
            f"no extractable text in PDF ({len(pages)} page{'s' if len(pages) != 1 else ''}; "
            + (f"scanned images? {_no_ocr_reason(options)})" if scans else "no text layer and no images)"),
            hint=OCR_HINT
            if scans and options.ocr != "off"
            else "run OCR first (e.g. `ocrmypdf in.pdf out.pdf`) and ingest the result",
        )
    meta = _metadata(info, len(pages))
    notes = ocr.notes
    if ocr.pages:
        meta["ocr_pages"] = ocr.pages
        meta["ocr_confidence"] = round(ocr.confidence, 3)
    elif scans:
        notes += (("OcrWarning", f"page(s) {_pages(scans)} hold images without text: {_no_ocr_reason(options)}"),)
    first_line = pages[0][0].split("\n", 1)[0].strip() if pages and pages[0] else ""
    title = meta.get("pdf_title") or (first_line if len(first_line) < _TITLE_MAX else "") or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="pdf", metadata=meta, notes=notes)]


def _read(
    data: bytes, options: ExtractOptions
) -> tuple[dict[str, Any], list[list[str]], list[_Boxes], list[int], _Ocr]:
    """The info dictionary, each page's paragraphs and where their lines are, the pages that are
    images without usable text, and what OCR made of them (when it ran); pdfplumber's errors
    become ExtractErrors."""
    import pdfplumber  # heavy; only for PDFs

    try:
        with pdfplumber.open(io.BytesIO(data)) as pdf:
            pages, where, scans = [], [], []
            for n, page in enumerate(pdf.pages, 1):
                placed = _page_paragraphs(page, options.tables)
                if not _usable([p for p, _ in placed]) and page.images:  # only then: OCR costs nothing elsewhere
                    scans.append(n)
                    placed = []
                pages.append([p for p, _ in placed])
                where.append(dict(placed))
            ocr = _ocr(pdf, scans, pages, where, options) if scans and _ocr_on(options) else _Ocr()
            return dict(pdf.metadata or {}), pages, where, scans, ocr
    except ExtractError:
        raise
    except Exception as e:  # pdfminer raises many unrelated classes for bad input
        raise _pdf_error(e) from e


@dataclass(frozen=True)
class _Ocr:
    """What OCR read: the pages it gave text for, their mean confidence, the warnings it recorded."""

    pages: list[int] = field(default_factory=list)
    confidence: float = 1.0
    notes: tuple[tuple[str, str], ...] = ()


def _ocr_on(options: ExtractOptions) -> bool:
    from .ocr import ocr_available

    return options.ocr == "auto" and ocr_available()


def _no_ocr_reason(options: ExtractOptions) -> str:
    if _ocr_on(options):
        return "OCR found no text"
    return "OCR is off ([extract] ocr)" if options.ocr == "off" else "OCR is not installed (kbctl[ocr])"


def _ocr(pdf, scans: list[int], pages: list[list[str]], where: list[_Boxes], options: ExtractOptions) -> _Ocr:
    """Read the pages ``scans`` with OCR into ``pages`` (and their lines' boxes into ``where``);
    low-confidence pages become warnings."""
    from .ocr import confidence, paragraphs, read_image

    done, scores, notes = [], [], []
    for n in scans:
        image = pdf.pages[n - 1].to_image(resolution=options.ocr_dpi).original
        lines = read_image(image)
        scale = 72 / options.ocr_dpi  # pixels → points
        placed = [
            _with_boxes(
                [(ln.text, ln.box[0] * scale, ln.box[1] * scale, ln.box[2] * scale, ln.box[3] * scale) for ln in p]
            )
            for p in paragraphs(lines, image.width)
        ]
        pages[n - 1] = [p for p, _ in placed]
        where[n - 1] = dict(placed)
        if not lines:
            continue
        score = confidence(lines)
        done.append(n)
        scores.append(score)
        if score < options.ocr_min_confidence:
            notes.append(("OcrWarning", f"page {n} read by OCR with low confidence {score:.2f}: check its text"))
        log.info("OCR page %d: %d lines, confidence %.2f", n, len(lines), score)
    return _Ocr(done, sum(scores) / len(scores) if scores else 1.0, tuple(notes))


def _usable(paragraphs: list[str]) -> bool:
    """Whether a page's text layer is text: at least half of its visible characters letters, digits
    or punctuation (not ``(cid:12)`` glyph codes, private-use or control characters)."""
    text = _CID.sub("\ufffd", "".join(paragraphs))
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return False
    good = sum(1 for c in visible if c.isalnum() or c in _PUNCT)
    return good >= 0.5 * len(visible)


def _pages(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:10])) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def _table_path(paragraphs: list[str], i: int) -> tuple[str, ...]:
    """The heading path of a page's paragraph: for a table, its caption or the short line above it."""
    if i == 0 or not table_header(paragraphs[i]):
        return ()
    above = paragraphs[i - 1]
    last = above.rsplit("\n", 1)[-1]
    if is_caption(last):
        return (last,)
    if table_header(above) or "\n" in above or len(above) > _TITLE_MAX:
        return ()
    return (above,)


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


def _page_paragraphs(page, tables: bool = True) -> list[tuple[str, tuple[tuple[float, ...], ...]]]:
    """A page's lines grouped into paragraphs at gaps wider than the usual line spacing; its ruled
    tables (pdfplumber's table finder) as Markdown tables, in their place."""
    found = _tables(page) if tables else []
    if found:
        boxes = [t.bbox for t in found]
        page = page.filter(lambda o: o.get("object_type") != "char" or not _inside(o, boxes))
    regions = _regions(page)
    placed, order = [], []
    # each character in the one region holding its centre: a crop cuts the lines at its edge, and
    # within_bbox drops a character reaching over it (a caption's larger label beside its line)
    where = {id(c): _region(c, regions) for c in page.chars} if len(regions) > 1 else {}
    for r in range(len(regions)):
        part = page if len(regions) == 1 else page.filter(lambda o, r=r: where.get(id(o), r) == r)
        for ln in part.extract_text_lines(return_chars=False, x_tolerance_ratio=_X_TOLERANCE):
            if ln["text"].strip():
                placed.append((ln["top"], ln["bottom"], ln["text"].strip(), False, ln["x0"], ln["x1"]))
                order.append(r)
    for t in found:
        md = markdown_table(t.extract())
        if md:
            placed.append((t.bbox[1], t.bbox[3], md, True, t.bbox[0], t.bbox[2]))
            order.append(next((r for r, g in enumerate(regions) if _inside(_as_obj(t.bbox), [g])), 0))
    return _group([p for _, p in sorted(zip(order, placed), key=lambda x: (x[0], x[1][0]))])


def _region(char: dict[str, Any], regions: list[tuple[float, float, float, float]]) -> int:
    """The first of ``regions`` holding a character's centre (-1 for none: it is read in none)."""
    return next((r for r, g in enumerate(regions) if _inside(char, [g])), -1)


def _as_obj(bbox: tuple[float, float, float, float]) -> dict[str, float]:
    return {"x0": bbox[0], "top": bbox[1], "x1": bbox[2], "bottom": bbox[3]}


def _regions(page) -> list[tuple[float, float, float, float]]:
    """The parts of a page in reading order: the whole page, or for a page in columns its full-width
    bands (a title, a running header, a figure's caption or a paragraph across the page) in their
    place and each band of columns as its columns from left to right (``_split``).

    A band of columns lies between the lines that cross a gutter, and holds three lines or more of
    text on each side of it, 8 points apart or more (``_columns``). The gutter nearest the page's
    middle is taken first; each part is then looked at again in the same way, so a page of three
    columns is split twice, and a band of three columns above or below one of two is split in its
    turn. The page is read so when its bands of columns make a quarter of its height or more."""
    whole = (page.bbox[0], page.bbox[1], page.bbox[2], page.bbox[3])
    words = page.extract_words(x_tolerance_ratio=_X_TOLERANCE)
    if len(words) < 20:
        return [whole]
    x0, top, x1, bottom = whole
    # the lattice of gutters tried: every 2 points from the start of the page's middle fifth, which
    # is always tried (a two-column page is split where it was before gutters were looked for further out)
    page = _Page(int(x0 + 0.4 * (x1 - x0)), int(x0 + 0.6 * (x1 - x0)), x1 - x0)
    regions, covered = _split(page, words, whole, (x0 + x1) / 2, 0.0, 0)
    return regions if covered >= 0.25 * (bottom - top) else [whole]


@dataclass(frozen=True)
class _Page:
    """What every part of a page is split by: the page's middle fifth (``lo``, ``hi``: the first and
    last gutter tried there, on the lattice of 2 points from ``lo``) and its width."""

    lo: int
    hi: int
    width: float


_Box = tuple[float, float, float, float]
_DEPTH = 4  # how many times a part of a part is split at most (three columns under two: three)
_SIDE = 0.15  # the narrowest column, as a fraction of the page's width


def _split(
    page: _Page, words: list[dict[str, Any]], box: _Box, centre: float, least: float, depth: int
) -> tuple[list[_Box], float]:
    """``box`` (holding ``words``) in reading order, and how high its bands of columns are (those of
    its full-width pieces with them, not those inside its columns): whole, or cut at the gutter
    nearest ``centre`` whose bands of columns make ``least`` of its height, each piece split again."""
    if len(words) < 20 or depth > _DEPTH:
        return [box], 0.0
    x0, top, x1, bottom = box
    words = sorted(words, key=lambda w: w["top"])
    tops = [w["top"] for w in words]
    # a gutter leaves a column of a sixth of the page or so on each side; the page's middle fifth is
    # always tried
    lo = max(x0, min(w["x0"] for w in words) + _SIDE * page.width)
    hi = min(x1, max(w["x1"] for w in words) - _SIDE * page.width)
    if depth == 0:
        lo, hi = min(lo, page.lo), max(hi, page.hi)
    first = page.lo - 2 * int((page.lo - lo) // 2)  # the lattice point at lo or after it
    grid = list(range(first, int(hi) + 1, 2))
    if not grid:
        return [box], 0.0
    crossing: list[list[int]] = [[] for _ in grid]  # by gutter, the words across it, by their top
    for i, w in enumerate(words):
        for k in range(bisect_right(grid, w["x0"]), bisect_left(grid, w["x1"])):
            crossing[k].append(i)
    spans: dict[int, list[tuple[float, float, int, int]]] = {}

    def spans_at(k: int) -> list[tuple[float, float, int, int]]:
        # a gutter's bands of six words or more (three lines a side); a band's words: below its
        # head or touching it, above its foot (a word reaching past either is in neither)
        if k not in spans:
            across = [(words[i]["top"], words[i]["bottom"]) for i in crossing[k]]
            found = [(h, f, bisect_left(tops, h), bisect_right(tops, f)) for h, f in _bands(across, top, bottom)]
            spans[k] = [s for s in found if s[3] - s[2] >= 6]
        return spans[k]

    inside: dict[tuple[int, int], list[dict[str, Any]]] = {}

    def columns_at(k: int) -> list[tuple[float, float]]:
        out = []
        for h, f, a, b in spans_at(k):
            if (a, b) not in inside:
                inside[(a, b)] = [w for w in words[a:b] if w["bottom"] <= f]
            if _columns(inside[(a, b)], grid[k], page.width):
                out.append((h, f))
        return out

    def height(bands) -> float:
        return sum(b[1] - b[0] for b in bands)

    # the nearest gutter whose bands of columns are high enough; then, along the gutters next to it
    # that still have bands, the one whose bands are the highest and the same (most of them the
    # first one's): not one through a column's ragged edge, crossed by its longer lines, nor another
    # band's gutter further on
    order = sorted(range(len(grid)), key=lambda k: abs(grid[k] - centre))
    best: tuple[float, int, list[tuple[float, float]]] | None = None
    for k in order:
        if height(spans_at(k)) >= max(least, 1e-9):
            bands = columns_at(k)
            if bands and height(bands) >= least:
                best = (height(bands), k, bands)
                break
    if best is None:
        return [box], 0.0
    start, found = best[1], best[2]
    for step in (-1, 1):
        k = start + step
        # along the gutter: while most of the first one's bands have bands here (not inside a column)
        while 0 <= k < len(grid) and _overlap(spans_at(k), found) >= 0.5 * height(found):
            if height(spans_at(k)) > best[0]:
                bands = columns_at(k)
                if height(bands) > best[0] and _overlap(bands, found) >= 0.5 * height(found):
                    best = (height(bands), k, bands)
            k += step
    covered, k, bands = best
    gx = grid[k]
    bands = [_trimmed(inside[(a, b)], gx, h, f) for h, f, a, b in spans_at(k) if (h, f) in bands]
    regions: list[_Box] = []
    above = top
    for h, f in bands:
        piece, more = _part(page, words, (x0, above, x1, h), depth)
        regions += piece + _part(page, words, (x0, h, gx, f), depth)[0] + _part(page, words, (gx, h, x1, f), depth)[0]
        covered += more
        above = f
    piece, more = _part(page, words, (x0, above, x1, bottom), depth)
    return regions + piece, covered + more


def _trimmed(words: list[dict[str, Any]], gx: float, head: float, foot: float) -> tuple[float, float]:
    """A band of columns without the few lines (three at most) above a gap wider than its usual
    line spacing at its head, or below one at its foot, when none of them has text where the band's
    right column starts: the last lines of longer columns of the band above, or the first of the
    band below, that do not cross its gutter where nothing runs across the page between them."""
    rows: dict[float, list[dict[str, Any]]] = {}
    for w in words:
        rows.setdefault(round(w["top"], 1), []).append(w)
    lines = sorted(rows)
    if len(lines) < 8:
        return head, foot
    starts = {y: min((w["x0"] for w in rows[y] if w["x0"] >= gx), default=None) for y in lines}
    edge = median(x for x in starts.values() if x is not None)
    spacing = median(b - a for a, b in pairwise(lines))
    gaps = [i for i, (a, b) in enumerate(pairwise(lines), 1) if b - a > 1.5 * spacing]

    def strays(few: list[float]) -> bool:
        return not any(starts[y] is not None and abs(starts[y] - edge) <= 2 for y in few)

    first = next((i for i in gaps if i <= 3), None)
    last = next((i for i in reversed(gaps) if len(lines) - i <= 3), None)
    if first is not None and strays(lines[:first]):
        head = max(w["bottom"] for y in lines[:first] for w in rows[y])
    if last is not None and last > (first or 0) and strays(lines[last:]):
        foot = lines[last]
    return head, foot


def _overlap(bands: Sequence[tuple[float, ...]], others: list[tuple[float, float]]) -> float:
    """How much of ``bands`` (vertical spans from the top: their head and foot first) lies within ``others``."""
    return sum(max(0.0, min(b[1], g) - max(b[0], e)) for b in bands for e, g in others)


def _part(page: _Page, words: list[dict[str, Any]], box: _Box, depth: int) -> tuple[list[_Box], float]:
    """A piece of a split part (none when it has no height), split again by the words whose centre
    it holds: its gutters nearest its words' middle first, its bands a quarter of its height."""
    if box[3] <= box[1]:
        return [], 0.0
    inside = [w for w in words if _inside(w, [box])]
    if len(inside) < 20:
        return [box], 0.0
    centre = (min(w["x0"] for w in inside) + max(w["x1"] for w in inside)) / 2
    return _split(page, inside, box, centre, 0.25 * (box[3] - box[1]), depth + 1)


def _bands(across: list[tuple[float, float]], top: float, bottom: float) -> list[tuple[float, float]]:
    """The vertical spans of a part of a page that no word crosses at a gutter (``across``: the top
    and bottom of the words that do, by their top): between those words (the lines across the part)
    and from the part's edges to them."""
    bands, above = [], top
    for w_top, w_bottom in across:
        if w_top > above:
            bands.append((above, w_top))
        if w_bottom > above:
            above = w_bottom
    if bottom > above:
        bands.append((above, bottom))
    return bands


def _columns(words: list[dict[str, Any]], gx: float, width: float) -> bool:
    """Whether ``words`` (none crossing ``gx``) are columns of text either side of it: three lines or
    more each, side by side (three or more, and half the shorter side's, beside a line of the other:
    not a listing's lines above or below a few notes), neither under a quarter of the words, 8 points
    apart or more, the left side's lines running up to the gutter (within a tenth of the page's
    width and a quarter of the side's), three words or more on the usual line of each side (not a
    table's cells, a list of terms or of page numbers), and not in a monospaced font (a listing, its
    comments aligned beside its lines)."""
    right = [w for w in words if w["x0"] >= gx]
    if len(right) < max(3, 0.25 * len(words)):  # most pages: nothing right of the gutter
        return False
    left = [w for w in words if w["x1"] <= gx]
    sides = _rows(left), _rows(right)
    rows = sorted(sides[0]), sorted(sides[1])
    if min(len(rows[0]), len(rows[1])) < 3 or min(len(left), len(right)) < 0.25 * len(words):
        return False
    shorter, longer = sorted(rows, key=len)
    height = median(w["bottom"] - w["top"] for w in words)
    beside = sum(1 for y in shorter if _near(longer, y, height))
    within = min(0.1 * width, 0.25 * (gx - min(w["x0"] for w in left)))
    return (
        beside >= max(3, len(shorter) / 2)
        and min(w["x0"] for w in right) - max(w["x1"] for w in left) >= _GUTTER
        and median(max(w["x1"] for w in row) for row in sides[0].values()) >= gx - within
        and all(median(len(row) for row in side.values()) >= 3 for side in sides)
        and not _monospaced(words)
    )


def _rows(words: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Words by their line (their top, to the point)."""
    rows: dict[int, list[dict[str, Any]]] = {}
    for w in words:
        rows.setdefault(round(w["top"]), []).append(w)
    return rows


def _monospaced(words: list[dict[str, Any]]) -> bool:
    """Whether most words (of three characters or more) are as wide for their length and height as
    the usual one: every character of a monospaced font is (a listing, a terminal session)."""
    ratios = [
        (w["x1"] - w["x0"]) / len(w["text"]) / (w["bottom"] - w["top"])
        for w in words
        if len(w["text"]) >= 3 and w["bottom"] > w["top"]
    ]
    if len(ratios) < 6:
        return False
    usual = median(ratios)
    return sum(1 for r in ratios if abs(r - usual) <= 0.02 * usual) >= 0.8 * len(ratios)


def _near(ys: list[int], y: float, within: float) -> bool:
    """Whether one of ``ys`` (sorted) is within ``within`` of ``y``."""
    i = bisect_left(ys, y - within)
    return i < len(ys) and ys[i] <= y + within


def _tables(page) -> list:
    """The page's tables, looked for only on pages that draw lines or rectangles (the finder follows them)."""
    if not (page.objects.get("line") or page.objects.get("rect")):
        return []
    try:
        return [t for t in page.find_tables() if len(t.rows) >= 2]
    except Exception as e:  # the finder is a heuristic: a page it fails on is read as lines
        log.debug("table finder failed on page %s: %s", page.page_number, e)
        return []


def _inside(obj: dict[str, Any], boxes: list[tuple[float, float, float, float]]) -> bool:
    x = (obj["x0"] + obj["x1"]) / 2
    y = (obj["top"] + obj["bottom"]) / 2
    return any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)


_Boxes = dict[str, tuple[tuple[float, ...], ...]]


def _group(
    placed: list[tuple[float, float, str, bool, float, float]],
) -> list[tuple[str, tuple[tuple[float, ...], ...]]]:
    """Lines (top, bottom, text, is a table, x0, x1) into paragraphs with their lines' boxes; a
    table is a paragraph of its own."""
    if not placed:
        return []
    lines = [p for p in placed if not p[3]]
    gaps = [b[0] - a[1] for a, b in pairwise(lines)]
    heights = [p[1] - p[0] for p in lines] or [0.0]
    limit = max(1.5 * median(g for g in gaps if g > 0) if any(g > 0 for g in gaps) else 0, median(heights))
    paragraphs = []
    current: list[tuple[str, float, float, float, float]] = []
    last_bottom: float | None = None
    for top, bottom, text, is_table, x0, x1 in placed:
        if is_table or (current and last_bottom is not None and top - last_bottom > limit):
            if current:
                paragraphs.append(_with_boxes(current))
            current = []
        if is_table:
            paragraphs.append(_with_boxes([(text, x0, top, x1, bottom)]))
            last_bottom = None
            continue
        current.append((text, x0, top, x1, bottom))
        last_bottom = bottom
    if current:
        paragraphs.append(_with_boxes(current))
    return paragraphs


def _with_boxes(lines: list[tuple[str, float, float, float, float]]) -> tuple[str, tuple[tuple[float, ...], ...]]:
    """Lines (text, x0, top, x1, bottom) as a paragraph (joined by newlines) and each line's
    ``(offset, length, x0, top, x1, bottom)`` in it, to a tenth of a point; a word hyphenated at a
    line's end is joined (``dehyphenate``)."""
    lines = dehyphenate(lines)
    boxes, offset = [], 0
    for text, *box in lines:
        boxes.append((offset, len(text), *(round(v, 1) for v in box)))
        offset += len(text) + 1
    return "\n".join(t for t, *_ in lines), tuple(boxes)


def dehyphenate(lines: list[tuple[str, float, float, float, float]]) -> list[tuple[str, float, float, float, float]]:
    """Lines (text, box…) with a word broken at a line's end ("proto-" / "col used") whole on the
    first line ("protocol" / "used"), so that it is found; a compound keeps its hyphen when the rest
    has one ("state-" / "of-the-art"), and a hyphen before a capital ("Anglo-" / "Saxon") stays. A
    URL, an address or a path broken at a hyphen of its own ("https://my-" / "site.org") is joined
    with it (``_address``), and so is one broken after a "/" or a "." when the next line goes on
    with it (``_broken_address``); a hyphen after a word in capitals is the text's ("TCP/IP-" /
    "based" is "TCP/IP-based")."""
    out = list(lines)
    for i in range(len(out) - 1):
        text, nxt = out[i][0], out[i + 1][0]
        word, _, rest = nxt.partition(" ")
        token = text.rsplit(None, 1)[-1] if text.strip() else ""
        if _broken_address(token, word):
            joined = text + word
        elif not nxt[:1].islower():
            continue
        elif token[-1:] in ("-", "\u2010") and _address(token[:-1], word):
            joined = text + word
        elif _HYPHEN_END.search(text):
            keep = "-" in word or _CAPITALS_END.search(token)  # a compound's hyphen; "IP-" / "based"
            joined = text[:-1] + ("-" if keep else "") + word
        else:
            continue
        out[i] = (joined, *out[i][1:])
        out[i + 1] = (rest.lstrip(), *out[i + 1][1:])
    return [ln for ln in out if ln[0]]


#: The word before a hyphen ending a token, in capitals ("TCP/IP-", "API-", "X-"): no typesetter
#: breaks such a word, so the hyphen is the text's.
_CAPITALS_END = re.compile(r"(?<![^\W\d_])[A-Z0-9]*[A-Z][A-Z0-9]*[-\u2010]$")


def _broken_address(token: str, word: str) -> bool:
    """Whether a line's last token, ending in "/" or ".", is a URL or an absolute path broken there
    and ``word`` (the next line's first) its rest: the token holds "://" or starts with "www." (a
    path: starts with "/" or "~/" and holds another "/"); after a "." the rest holds a "/"
    ("https://www.example." / "org/docs"), after a "/" a "/", a query's or a file name's mark
    (``_GOES_ON``: "docs.example.org/" / "guide/intro.html"). A sentence ending with an address
    ("https://example.org." / "then …", "https://example.org/" / "and …") is not joined."""
    if token[-1:] not in ("/", ".") or not word[:1].isalnum():
        return False
    head = token.lstrip("(<[\"'«“‘")
    if not ("://" in head or head.startswith("www.") or (head.startswith(("/", "~/")) and head.count("/") > 1)):
        return False
    rest = word.rstrip(_TRAILING)
    return "/" in rest if token.endswith(".") else bool(_GOES_ON.search(rest))


def _address(head: str, rest: str) -> bool:
    """Whether a token broken after a hyphen (``head``, then ``rest`` on the next line) is a URL, an
    e-mail address or a path, whose hyphen is its own: "://", "www." or "@" before the hyphen, or a
    "/" in a path ("/etc/kb-" / "ctl", "docs/my-" / "file.md"; not a pair of words, "input/out-" /
    "put")."""
    if any(m in head for m in ("://", "www.", "@")):
        return True
    if "/" not in head:
        return False
    whole = (head + rest).rstrip(_TRAILING)
    return whole.startswith(("/", "~", ".")) or whole.count("/") > 1 or "." in whole


def drop_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Drop running headers and footers: a first or last paragraph of at most three short lines
    that recurs at the same place on at least half of the pages (and on two or more), a page
    number in it aside, whether it counts from the first page or from another ("- 12 -" on page 14,
    seen on three pages or more)."""
    if len(pages) < 2:
        return pages
    running = set()
    for at in (0, -1):
        counts = Counter(k for n, p in enumerate(pages, 1) if p for k in _line_keys(p[at], n))
        running |= {(at, k) for k, c in counts.items() if c >= max(_least(k), len(pages) / 2)}
    out = []
    for n, page in enumerate(pages, 1):
        page = list(page)
        for at in (0, -1):
            if page and any((at, k) in running for k in _line_keys(page[at], n)):
                page.pop(at)
        out.append(page)
    return out


def _least(key: str) -> int:
    """The fewest pages a running line is seen on: three when numbered from another page, so that
    "Chapter 3" and "Chapter 4" heading pages 1 and 2 of three are not taken for one."""
    return 2 if key.startswith(("=", "0:")) else 3


def _line_keys(paragraph: str, page_number: int) -> set[str]:
    """What a short paragraph (three lines at most) is compared by: its text, and its text with one
    of its numbers masked, tagged with that number less the page number (empty for longer paragraphs)."""
    lines = paragraph.strip().split("\n")
    if len(lines) > 3 or any(len(ln) > _TITLE_MAX for ln in lines):
        return set()
    text = "\n".join(ln.strip() for ln in lines)
    keys = {"=" + text}
    for m in list(_NUMBER.finditer(text))[:4]:
        keys.add(f"{int(m.group()) - page_number}:{text[: m.start()]}#{text[m.end() :]}")
    return keys


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
