"""PDFs made at test time without a PDF library: text in Helvetica, ruled tables, scanned pages.

``text_pdf`` writes pages of positioned text and lines (the PDF operators by hand, Helvetica being
one of the standard fonts every reader knows without embedding it); ``scanned_pdf`` renders text to
an image with Pillow and wraps it in a PDF page without any text layer, like a scanner does.
"""

from __future__ import annotations

import io
from typing import Sequence

# A page item: ("text", x, y, size, string), ("text", x, y, size, string, "Courier") for a line in the
# monospaced standard font, or ("line", x0, y0, x1, y1); y from the page's top, in points.
Item = tuple

A4 = (595.0, 842.0)


def text_pdf(pages: Sequence[Sequence[Item]], size: tuple[float, float] = A4) -> bytes:
    """A PDF with a text layer: each page's text and lines."""
    w, h = size
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    font_id = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    fonts = f"/F1 {font_id} 0 R"
    if any(it[0] == "text" and len(it) > 5 for items in pages for it in items):  # only then: other PDFs unchanged
        objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>")
        fonts += f" /F2 {len(objects)} 0 R"
    kids = []
    for items in pages:
        ops = []
        for it in items:
            if it[0] == "text":
                _, x, y, pt, s, *font = it
                esc = s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
                ops.append(f"BT /{'F2' if font else 'F1'} {pt} Tf {x} {h - y} Td ({esc}) Tj ET")
            else:
                _, x0, y0, x1, y1 = it
                ops.append(f"0.8 w {x0} {h - y0} m {x1} {h - y1} l S")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content_id = len(objects)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {w} {h}] /Contents {content_id} 0 R "
            f"/Resources << /Font << {fonts} >> >> >>".encode()
        )
        kids.append(len(objects))
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>".encode()
    return assemble(objects)


def assemble(objects: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF file of ``objects`` (object 1 the catalog) with its cross-reference table; ``trailer``
    adds entries to the trailer's dictionary (`` /Encrypt 4 0 R``)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer, xref)
    return bytes(out)


def table_items(
    rows: Sequence[Sequence[str]], *, x: float = 50, y: float = 120, widths: Sequence[float] = (), row_h: float = 16
) -> list[Item]:
    """A ruled table: every cell's text and the grid around it."""
    widths = list(widths) or [110.0] * len(rows[0])
    items: list[Item] = []
    right = x + sum(widths)
    for r, row in enumerate(rows):
        top = y + r * row_h
        items.append(("line", x, top, right, top))
        cx = x
        for wd, cell in zip(widths, row):
            items.append(("text", cx + 3, top + row_h - 4.5, 9, cell))
            cx += wd
    bottom = y + len(rows) * row_h
    items.append(("line", x, bottom, right, bottom))
    cx = x
    for wd in [0.0, *widths]:
        cx += wd
        items.append(("line", cx, y, cx, bottom))
    return items


def scanned_pdf(
    pages: Sequence[Sequence[str]], *, font: str | None = None, dpi: int = 200, skew: float = 0.0, columns: int = 1
) -> bytes:
    """A PDF of page images of ``pages`` (lists of lines) and no text layer: a scan made at test time."""

    images = [render_page(lines, font=font, dpi=dpi, skew=skew, columns=columns) for lines in pages]
    buf = io.BytesIO()
    images[0].save(buf, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return buf.getvalue()


DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def render_page(
    lines: Sequence[str],
    *,
    font: str | None = None,
    dpi: int = 200,
    skew: float = 0.0,
    columns: int = 1,
    pt: float = 12,
):
    """An A4 page image (RGB) of ``lines`` at ``dpi``: one column, or ``columns`` side by side."""
    from PIL import Image, ImageDraw, ImageFont

    w, h = int(8.27 * dpi), int(11.69 * dpi)
    px = int(pt * dpi / 72)
    try:
        face = ImageFont.truetype(font or DEJAVU, px)
    except OSError:
        face = ImageFont.load_default(size=px)
    img = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(img)
    margin = int(0.8 * dpi)
    col_w = (w - 2 * margin) // columns
    per_col = -(-len(lines) // columns)
    for i, line in enumerate(lines):
        c, r = divmod(i, per_col)
        draw.text((margin + c * col_w, margin + r * int(px * 1.7)), line, font=face, fill="black")
    if skew:
        img = img.rotate(skew, expand=False, fillcolor="white", resample=Image.BICUBIC)
    return img
