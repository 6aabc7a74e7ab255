"""OCR of scanned pages: character error rate and pages per second, on pages made at run time.

    python bench/ocr.py [--pages N] [--no-write]

Known text (sentences of sample_corpus/, wrapped to lines) is rendered to A4 page images at 200 dpi
with Pillow in several fonts (DejaVu Sans, Serif and Sans Mono, Liberation Serif when installed),
one page turned by 2 degrees, one set in two columns, and wrapped in PDFs without a text layer: what
a scanner gives. Each PDF goes through ``kbctl.extract.extract`` (pdfplumber, then OCR of the page:
``kbctl.extract.ocr``, RapidOCR). The character error rate is the Levenshtein distance between the
text OCR gave and the text rendered (whitespace collapsed, reading order: a column after the other)
over the rendered text's length. Seconds (wall clock and CPU, all threads) and pages per second
count the whole extract (render + OCR), the engine's one-time load excluded (measured apart).

A last row checks that OCR costs nothing where it is not needed: the extract time of a PDF with a
text layer (20 pages of the same text) with ``ocr = "auto"`` and with ``ocr = "off"``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import REPO, machine, md_table, write_section

FONTS = {
    "DejaVu Sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "DejaVu Serif": "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "DejaVu Sans Mono": "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "Liberation Serif": "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
}


def corpus_lines(width: int) -> list[str]:
    """Sentences of the sample corpus (ASCII only: the bundled model's alphabet), wrapped to ``width``."""
    text = " ".join(p.read_text() for p in sorted((REPO / "sample_corpus").rglob("*.md")))
    text = re.sub(r"[#*`>|\[\]()_-]+", " ", text)
    text = "".join(c for c in text if c.isascii() and (c.isalnum() or c in " .,;:'?!"))
    return textwrap.wrap(" ".join(text.split()), width)


def cer(reference: str, hypothesis: str) -> float:
    from rapidfuzz.distance import Levenshtein

    ref, hyp = " ".join(reference.split()), " ".join(hypothesis.split())
    return Levenshtein.distance(ref, hyp) / max(1, len(ref))


def run_case(name: str, lines: list[str], **render) -> dict:
    from kbctl.extract import extract
    from kbctl.types import Source
    from tests.pdfmake import scanned_pdf

    data = scanned_pdf([lines], **render)
    t, cpu = time.perf_counter(), time.process_time()
    (doc,) = extract(Source(uri=f"file:///bench/{name}.pdf", content=data, media_type="application/pdf"))
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {
        "page": name,
        "characters": len(" ".join(lines)),
        "CER %": 100 * cer(" ".join(lines), doc.text),
        "confidence": doc.metadata.get("ocr_confidence"),
        "seconds": seconds,
        "CPU seconds": cpu,
        "pages/s": 1 / seconds,
    }


def text_layer_cost(lines: list[str]) -> dict:
    from kbctl.extract import ExtractOptions, extract
    from kbctl.types import Source
    from tests.pdfmake import text_pdf

    pages = [[("text", 50, 60 + 14 * i, 10, ln) for i, ln in enumerate(lines[:50])] for _ in range(20)]
    src = Source(uri="file:///bench/text.pdf", content=text_pdf(pages), media_type="application/pdf")
    out: dict[str, float] = {}
    for mode in ("auto", "off") * 4:  # alternated, the best of four each (the machine is shared)
        t = time.perf_counter()
        extract(src, ExtractOptions(ocr=mode))
        out[mode] = min(out.get(mode, 1e9), time.perf_counter() - t)
    return {
        "text-layer PDF, 20 pages": "extract seconds (best of 4)",
        'ocr = "auto"': out["auto"],
        'ocr = "off"': out["off"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=30, help="lines per single-column page")
    ap.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    args = ap.parse_args()

    from kbctl.extract.ocr import _get_engine

    t = time.perf_counter()
    _get_engine()
    load = time.perf_counter() - t
    lines = corpus_lines(70)
    narrow = corpus_lines(34)
    rows = []
    start = 0
    for font, path in FONTS.items():
        if not os.path.exists(path):
            continue
        rows.append(run_case(font, lines[start : start + args.lines], font=path))
        start += args.lines
        print(rows[-1], file=sys.stderr, flush=True)
    rows.append(
        run_case("DejaVu Sans, turned 2°", lines[start : start + args.lines], font=FONTS["DejaVu Sans"], skew=2.0)
    )
    print(rows[-1], file=sys.stderr, flush=True)
    rows.append(run_case("DejaVu Sans, two columns", narrow[: 2 * args.lines], font=FONTS["DejaVu Sans"], columns=2))
    print(rows[-1], file=sys.stderr, flush=True)
    cost = text_layer_cost(lines)
    load_avg = os.getloadavg()[0]
    body = (
        f"_Measured {time.strftime('%Y-%m-%d %H:%M')} on {machine()}; load average {load_avg:.1f} while measuring; "
        f"engine load {load:.2f} s (once per process)._\n\n"
        + md_table(rows, ["page", "characters", "CER %", "confidence", "seconds", "CPU seconds", "pages/s"], digits=3)
        + "\n"
        + md_table([cost], digits=3)
    )
    print(body)
    if not args.no_write:
        write_section(REPO / "docs" / "benchmarks.md", "ocr", body)


if __name__ == "__main__":
    main()
