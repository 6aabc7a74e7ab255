"""Options of the extract stage: the ``[extract]`` table of the settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError

__all__ = ["ExtractOptions"]


@dataclass(frozen=True)
class ExtractOptions:
    """How to extract. ``ExtractOptions()`` is the normal case.

    ``ocr``: ``"auto"`` reads a PDF page that holds an image but no usable text with OCR when the
    ``kbctl[ocr]`` extra is installed; ``"off"`` never does. A page read with a confidence below
    ``ocr_min_confidence`` is stored with an ``OcrWarning`` in the run ledger. ``ocr_dpi`` is the
    resolution the page is rendered at for OCR. ``tables``: PDF tables (ruled ones, found by
    pdfplumber) become Markdown tables; off, their text is read as lines like the rest.
    """

    ocr: str = "auto"
    ocr_min_confidence: float = 0.8
    ocr_dpi: int = 200
    tables: bool = True

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | Any) -> ExtractOptions:
        """Options from the ``[extract]`` table (a mapping, or the typed ``ExtractSettings``);
        ``ConfigError`` for a value out of range."""
        if not isinstance(table, Mapping):
            table = {k: getattr(table, k) for k in ("ocr", "ocr_min_confidence", "ocr_dpi", "tables")}
        opts = cls(
            ocr=str(table.get("ocr", cls.ocr)),
            ocr_min_confidence=float(table.get("ocr_min_confidence", cls.ocr_min_confidence)),
            ocr_dpi=int(table.get("ocr_dpi", cls.ocr_dpi)),
            tables=bool(table.get("tables", cls.tables)),
        )
        if opts.ocr not in ("auto", "off"):
            raise ConfigError(f'extract.ocr must be "auto" or "off", not {opts.ocr!r}')
        if not 0 <= opts.ocr_min_confidence <= 1:
            raise ConfigError(f"extract.ocr_min_confidence must be between 0 and 1, not {opts.ocr_min_confidence:g}")
        if not 50 <= opts.ocr_dpi <= 600:
            raise ConfigError(f"extract.ocr_dpi must be between 50 and 600, not {opts.ocr_dpi}")
        return opts
