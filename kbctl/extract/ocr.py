"""Optical character recognition for pages that hold an image but no usable text (``kbctl[ocr]``).

The engine is RapidOCR (``rapidocr-onnxruntime``: PaddleOCR's PP-OCRv4 detection and recognition
models, shipped inside the wheel, run on onnxruntime). It reads Latin script (English and other
languages without many accents) and Chinese: those are the models the wheel carries. It is
imported, and its models loaded (~0.4 s), only when a page needs it, once per process.

``read_image`` gives the lines it found, each with its box (in the image's pixels) and the
engine's confidence; ``paragraphs`` orders them for reading — top to bottom, a page with a clear
gutter column by column — and joins lines into paragraphs at wider vertical gaps.
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from dataclasses import dataclass
from itertools import pairwise
from statistics import median
from typing import Any, Sequence

from ..errors import ExtractError

__all__ = ["OcrLine", "ocr_available", "read_image", "paragraphs", "confidence", "OCR_HINT"]

log = logging.getLogger(__name__)

OCR_HINT = (
    "install the OCR extra (`pip install 'kbctl[ocr]'`) and ingest it again, or run `ocrmypdf in.pdf out.pdf` first"
)

# Detection: the page scaled so its longer side is at most this many pixels (the default, the
# shorter side at least 736, makes a 200 dpi page 4 times slower for the same text).
_DET_SIDE = 1600
# How far detected text boxes are grown before the line is cut out: the default (1.6) cuts lines
# so tightly that the recogniser loses the spaces between words (bench/ocr.py).
_UNCLIP = 2.4
_lock = threading.Lock()
_engine: Any = None


@dataclass(frozen=True)
class OcrLine:
    """One line of text OCR found: its text, its box ``(x0, top, x1, bottom)`` in pixels, its confidence (0-1)."""

    text: str
    box: tuple[float, float, float, float]
    confidence: float


def ocr_available() -> bool:
    """Whether the OCR extra is installed (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("rapidocr_onnxruntime") is not None


def _get_engine():
    global _engine
    with _lock:
        if _engine is None:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as e:
                raise ExtractError("OCR is not installed", hint=OCR_HINT) from e
            _engine = RapidOCR(det_limit_side_len=_DET_SIDE, det_limit_type="max")
        return _engine


def read_image(image: Any) -> list[OcrLine]:
    """The lines of text in ``image`` (a PIL image or an RGB array), in the engine's order."""
    import numpy as np

    engine = _get_engine()
    arr = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image)
    with _lock:  # one engine per process; onnxruntime sessions are not shared between threads here
        # no angle classifier: it turns some upright lines of a clean page upside down (bench/ocr.py)
        result, _ = engine(arr, use_cls=False, unclip_ratio=_UNCLIP)
    lines = []
    for points, text, score in result or ():
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        text = " ".join(
            unicodedata.normalize("NFKC", str(text)).split()
        )  # NFKC: the model's full-width commas and colons → ASCII
        if text:
            lines.append(OcrLine(text, (min(xs), min(ys), max(xs), max(ys)), float(score)))
    return lines


def confidence(lines: Sequence[OcrLine]) -> float:
    """The confidence of a page: its lines' confidences weighted by their length (1.0 when empty)."""
    total = sum(len(ln.text) for ln in lines)
    return sum(ln.confidence * len(ln.text) for ln in lines) / total if total else 1.0


def paragraphs(lines: Sequence[OcrLine], width: float) -> list[list[OcrLine]]:
    """The lines in reading order, grouped into paragraphs where the vertical gap is wide (a
    paragraph's text is its lines' texts joined by newlines)."""
    ordered = _reading_order(list(lines), width)
    if not ordered:
        return []
    height = median(ln.box[3] - ln.box[1] for ln in ordered)
    out: list[list[OcrLine]] = []
    current = [ordered[0]]
    for prev, ln in pairwise(ordered):
        gap = ln.box[1] - prev.box[3]
        if gap > 0.9 * height or gap < -2 * height:  # a wide gap, or a jump back up (the next column)
            out.append(current)
            current = []
        current.append(ln)
    out.append(current)
    return out


def _reading_order(lines: list[OcrLine], width: float) -> list[OcrLine]:
    """Top to bottom; where a gutter splits the page into two columns, the left column before the
    right one (lines that cross the gutter, such as a title, close the run of columns above them)."""
    lines.sort(key=lambda ln: (ln.box[1], ln.box[0]))
    gutter = _gutter(lines, width)
    if gutter is None:
        return lines
    out: list[OcrLine] = []
    left: list[OcrLine] = []
    right: list[OcrLine] = []
    for ln in lines:
        if ln.box[0] < gutter < ln.box[2]:
            out += left + right + [ln]
            left, right = [], []
        elif ln.box[2] <= gutter:
            left.append(ln)
        else:
            right.append(ln)
    return out + left + right


def _gutter(lines: list[OcrLine], width: float) -> float | None:
    """The x of an empty vertical band in the middle third of the page that several lines on each
    side border, else ``None``."""
    if len(lines) < 6 or width <= 0:
        return None
    step = width / 200
    covered = [0] * 200
    for ln in lines:
        for i in range(int(ln.box[0] / step), min(199, int(ln.box[2] / step)) + 1):
            covered[i] += 1
    best: tuple[int, int] | None = None  # the longest empty run: (length, middle index)
    run = 0
    for i in range(66, 134):
        run = run + 1 if covered[i] <= max(1, len(lines) // 20) else 0
        if run and (best is None or run > best[0]):
            best = (run, i - run // 2)
    if best is None or best[0] < 2:
        return None
    x = best[1] * step
    left = sum(1 for ln in lines if ln.box[2] <= x)
    right = sum(1 for ln in lines if ln.box[0] >= x)
    return x if left >= 3 and right >= 3 else None
