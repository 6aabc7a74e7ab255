"""A PDF page rendered with a passage boxed: what ``kbctl show CHUNK --highlight out.png`` writes.

The boxes are a chunk's (``kbctl.chunk``: one ``(page, x0, top, x1, bottom)`` per line, in PDF
points from the page's top left). The page is rendered with pypdfium2 (pdfplumber's renderer), the
lines' boxes are drawn over it in a translucent yellow with a red frame around their union.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from ..errors import ExtractError, UsageError

__all__ = ["render_highlight"]


def render_highlight(pdf: bytes, boxes: Sequence[Sequence[float]], out: Path, *, dpi: int = 110) -> dict:
    """Write ``out`` (PNG): the page of ``boxes``' first entry, the boxes of that page marked.
    Returns the page number, the image's size and how many boxes were drawn."""
    import pypdfium2 as pdfium
    from PIL import Image, ImageDraw

    if not boxes:
        raise ExtractError(
            "this chunk has no boxes to show", hint="only chunks of PDFs ingested by this version have them"
        )
    page_no = int(boxes[0][0])
    try:
        doc = pdfium.PdfDocument(io.BytesIO(pdf))
        page = doc[page_no - 1]
    except Exception as e:
        raise ExtractError(
            f"cannot open page {page_no} of the PDF: {e}", hint="has the file changed since it was ingested?"
        ) from e
    scale = dpi / 72
    image = page.render(scale=scale).to_pil().convert("RGBA")
    layer = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    mine = [[v * scale for v in b[1:5]] for b in boxes if int(b[0]) == page_no]
    for x0, top, x1, bottom in mine:
        draw.rectangle((x0 - 2, top - 2, x1 + 2, bottom + 2), fill=(255, 230, 0, 90))
    x0, top = min(b[0] for b in mine), min(b[1] for b in mine)
    x1, bottom = max(b[2] for b in mine), max(b[3] for b in mine)
    draw.rectangle((x0 - 5, top - 5, x1 + 5, bottom + 5), outline=(220, 0, 0, 255), width=3)
    try:
        Image.alpha_composite(image, layer).convert("RGB").save(out, "PNG")
    except OSError as e:  # a folder that is not there, a folder given as the file, no permission
        raise UsageError(
            f"--highlight {out}: cannot write ({e.strerror or e})",
            hint="give a PNG file's path in a folder that exists and may be written",
        ) from None
    return {"page": page_no, "width": image.width, "height": image.height, "boxes": len(mine), "path": str(out)}
