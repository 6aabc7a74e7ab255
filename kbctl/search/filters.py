"""Metadata filters: parsed into ``kbctl.types.Filter`` here, compiled to SQL by ``kbctl.store.filters``.

Syntax (one filter per ``--filter``):

=============  ================================================================
``key=value``  equal; for a list value (tags) the list contains ``value``
``key!=value`` not equal (and not contained)
``key>=value`` ``>``, ``<=``, ``<`` compare numbers as numbers, ISO dates and
               datetimes as dates (below), and anything else as text
``key~prefix`` starts with ``prefix``; for a list, an item of it does
``key in a,b`` equal to (or contains) any of the values
=============  ================================================================

A comparison's number must be finite (``1e999``, ``inf`` and ``nan`` are usage errors, not text);
an ``in`` list must have values and no empty one (``key in ,`` is a usage error). Full-width digits
(``k>=１２``) are read as the ASCII number; a value in digits of another script is compared as text.

Dates: extraction stores datetimes in UTC as ``2024-05-01T12:00:00Z`` and dates as
``2024-05-01``, which sort correctly as text. A filter's datetime with an offset is converted to UTC
the same way, and a bare date means the whole day: ``date<=2024-05-01`` includes
``2024-05-01T12:00:00Z`` (it becomes ``< 2024-05-02``) and ``date>2024-05-01`` excludes it
(``>= 2024-05-02``). An impossible date (``2024-02-30``), and one that leaves years 1..9999 in
UTC (``0001-01-01T00:00+14:00``, ``date<=9999-12-31``), is a usage error.

Keys are any metadata key; ``source_type``, ``path``, ``uri``, ``title``, ``author``, ``date`` and
``tags`` are set by extraction. Values are always bound as parameters, never spliced into SQL.
"""

from __future__ import annotations

import math
import re
import unicodedata

from ..errors import UsageError, echo
from ..types import Filter

__all__ = ["Filter", "check_text", "parse_filter", "parse_filters"]

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
# What a comparison reads as a number (``kbctl.store.filters`` compares it as one): it must be finite.
_NUMERIC = re.compile(r"^[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|nan|inf|infinity)$", re.IGNORECASE | re.ASCII)
_FORM = re.compile(r"^\s*(?P<key>[^\s=!<>~]+)\s*(?P<op>!=|>=|<=|=|>|<|~|\s+in\s+)\s*(?P<value>.*?)\s*$")


def check_text(what: str, text: str) -> None:
    """A UsageError unless ``text`` can be stored and printed as UTF-8: no NUL (PostgreSQL's text
    holds none: a usage error here, not a database error there) and no lone surrogate (a byte of
    another encoding in a shell argument arrives as one; no embedder, JSON writer or statement
    takes it)."""
    head = text if len(text) <= 200 else text[:200] + "…"  # one line, whatever the text's length
    if "\x00" in text:
        raise UsageError(f"{what} {head!r} holds a NUL character", hint=f"remove it from the {what}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = head.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise UsageError(
            f"{what} {shown!r} is not UTF-8 text",
            hint="a byte of another encoding reached kbctl as it was: pass the text as UTF-8",
        ) from None


def parse_filter(text: str) -> Filter:
    """Parse one ``key<op>value`` filter; a malformed one is a UsageError with the syntax."""
    check_text("filter", text)
    m = _FORM.match(text)
    if not m or not m.group("value"):
        raise UsageError(
            f"cannot read filter {echo(text)}",
            hint="use key=value, key!=value, key>=value, key<=value, key>value, key<value, key~prefix or 'key in a,b'",
        )
    key, op, value = m.group("key"), m.group("op").strip(), m.group("value")
    if not _KEY.match(key):
        raise UsageError(f"invalid filter key {echo(key)}", hint="keys are letters, digits, _ . -")
    if op == "in":
        items = tuple(v.strip() for v in value.split(","))
        if not all(items):
            raise UsageError(
                f"filter {echo(text)}: an 'in' list needs values, none of them empty", hint="write 'key in a,b,c'"
            )
        return Filter(key, "in", items)
    if op in ("<", "<=", ">", ">="):
        value = _ascii_number(value)
    if op in ("<", "<=", ">", ">=") and _NUMERIC.match(value) and not math.isfinite(float(value)):
        raise UsageError(
            f"filter {echo(text)}: {echo(value)} is not a finite number",
            hint="compare with a number such as 10, -2.5 or 1e6",
        )
    return Filter(key, op, value)


def _ascii_number(value: str) -> str:
    """A comparison's number written in full-width digits (``１２``, ``２０２０``) in ASCII; any
    other value unchanged. Digits of other scripts (``٣``) stay text: compared as text, as any
    value that is not an ASCII number (PostgreSQL's numeric reads ASCII digits only)."""
    if value.isascii():
        return value
    folded = unicodedata.normalize("NFKC", value)
    return folded if folded.isascii() and _NUMERIC.match(folded) else value


def parse_filters(texts: list[str] | tuple[str, ...] | None) -> tuple[Filter, ...]:
    return tuple(parse_filter(t) for t in texts or ())
