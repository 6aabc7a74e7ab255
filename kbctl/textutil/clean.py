"""Values PostgreSQL refuses, taken out at the edge, each removal a note.

A ``text`` or ``jsonb`` value cannot hold NUL (U+0000); UTF-8 cannot encode a lone surrogate
(U+D800–U+DFFF, which is what ``surrogateescape`` decoding leaves of invalid bytes); ``jsonb`` has
no NaN or infinity. ``kbctl.types.Document`` calls ``clean_text`` and ``clean_metadata`` whenever
a document is built, so every extractor (and a document read back from NDJSON) is cleaned the same
way before it reaches the store; the notes become warnings in the run ledger.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

__all__ = ["clean_text", "clean_metadata", "removed", "CLEANED", "escape_undecodable"]

#: The warning class of a note about a removed value.
CLEANED = "CleanedWarning"

_REFUSED = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_DROP = object()  # a value that cannot be stored at all


def clean_text(text: str) -> tuple[str, int]:
    """``text`` without NUL and lone surrogates, and how many characters went."""
    if not _REFUSED.search(text):
        return text, 0
    return _REFUSED.subn("", text)


def escape_undecodable(text: str) -> str:
    """``text`` with its lone surrogates written out: ``\\xff`` for a byte that ``surrogateescape``
    decoding kept (a file name that is not UTF-8), ``\\ud800`` for any other. For names shown and
    stored as text; the exact bytes live in the name's uri."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_escape_one, text)


def _escape_one(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def removed(n: int, where: str) -> str:
    """The note for ``n`` characters removed from ``where``."""
    return f"removed {n} character(s) PostgreSQL cannot store (NUL or invalid Unicode) from {where}"


def clean_metadata(meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``meta`` as ``jsonb`` takes it: strings cleaned, NaN and infinities dropped; and the notes."""
    notes: list[str] = []
    out = _value(dict(meta), "metadata", notes)
    return out, notes


def _value(v: Any, where: str, notes: list[str]) -> Any:
    if isinstance(v, str):
        s, n = clean_text(v)
        if n:
            notes.append(removed(n, where))
        return s
    if isinstance(v, float) and not math.isfinite(v):
        notes.append(f"dropped {where}: {'NaN' if math.isnan(v) else 'infinity'} is not a number jsonb can hold")
        return _DROP
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            key, n = clean_text(str(k))
            if n:
                notes.append(removed(n, f"the key {where}.{key}"))
            x = _value(x, f"{where}.{key}", notes)
            if x is not _DROP:
                out[key] = x
        return out
    if isinstance(v, (list, tuple)):
        items = (_value(x, f"{where}[{i}]", notes) for i, x in enumerate(v))
        return [x for x in items if x is not _DROP]
    return v
