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

    Those that change a PDF's text (``tables``, ``ocr``, ``ocr_dpi``) are part of the version of
    every source a PDF's extractor reads (``revision``), so changing one reads them again.
    """

    ocr: str = "auto"
    ocr_min_confidence: float = 0.8
    ocr_dpi: int = 200
    tables: bool = True

    def revision(self, fmt: str) -> tuple[str, ...]:
        """What of these settings changes the text of ``fmt``'s own extractor (a name of
        ``detect_format``), as words of its revision (``kbctl.extract.extractor_revision``): one per
        setting off its default, so at the defaults ``()`` and a source hashes as it did before
        settings counted. Only the PDF extractor reads them: HTML, Word, ODT and PowerPoint tables
        are Markdown tables whatever ``tables`` says. ``ocr_dpi`` counts only while OCR may run
        (``ocr = "auto"``); ``ocr_min_confidence`` never: it decides a warning, not the text. Whether
        OCR is installed does not count (docs/hardening.md "Extract settings in the source hash")."""
        if fmt != "pdf":
            return ()
        words = []
        if self.ocr == "off":
            words.append("pdf-ocr-off")
        elif self.ocr_dpi != ExtractOptions.ocr_dpi:
            words.append(f"pdf-ocr-dpi-{self.ocr_dpi}")
        if not self.tables:
            words.append("pdf-tables-off")
        return tuple(words)

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
