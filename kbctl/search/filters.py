"""Metadata filters: parsed into ``kbctl.types.Filter`` here, compiled to SQL by ``kbctl.store.filters``.

Syntax (one filter per ``--filter``):

=============  ================================================================
``key=value``  equal; for a list value (tags) the list contains ``value``; a value that
               is a number equals the numbers equal to it (``rating=4.50``: a JSON 4.5
               and a text ``"4.5"``), ``True``/``TRUE``/``False`` are the booleans too
``key!=value`` not equal (and not contained); a chunk without the key is "not equal"
``key>=value`` ``>``, ``<=``, ``<`` compare numbers as numbers (a JSON number, or a
               text that is a decimal number: front matter's ``year: "2024"``),
               ISO dates and datetimes as dates (below), and anything else as text;
               for a list, an item of it does (``reviewers>0`` matches ``[1, 2]``)
``key~prefix`` starts with ``prefix``; for a list, an item of it does
``key in a,b`` equal to (or contains) any of the values
``key``        the key has a value: it is there and not null (the empty text is a value)
``!key``       the key has none: it is missing or null
=============  ================================================================

Quoting: a value (or an item of an ``in`` list) that begins with ``"`` or ``'`` is quoted: it ends
at the same quote, which is doubled inside it, and the text between is the value, spaces at its
ends included (``author="Priya Raman"``, ``title='say "hi"'``, ``title="say ""hi"" twice"``,
``author in "Raman, Priya",Bob``). A quote that opens a value and does not close it (or closes it
before its end) is a usage error, never text: to match a value that begins with a quote, quote it
(``title='"Quoted"'``). Quotes elsewhere in a value are text (``author=O'Brien``). A value that
begins with ``=``, ``<`` or ``>`` is quoted too (``expr="=a"``): unquoted it is a usage error, as
``title==x``, ``title<>x`` and ``year=>2024`` (operators of other languages) read as a value
``=x`` or a text comparison with ``> x`` and matched nothing without a word. Quotes only
delimit: ``year>="2024"`` compares as ``year>=2024``. ``str(filter)`` writes a filter back this way
(``quote_value``), so it reads back as the same filter.

Numbers: a value that is a decimal number in ASCII digits (``4.5``, ``+4.50``, ``2024.0``, ``1e3``)
is read as a number by every operator, and a stored text that is one (no spaces, ``_NUMERIC_TEXT``
in ``kbctl.store.filters``) as that number: ``=``, ``!=`` and ``in`` match a number or such a text
numerically equal to it, as well as a text that is the value itself, so ``version=1.1`` matches the
text ``"1.10"`` as ``version>=1.1`` and ``version<=1.1`` do (a value that is not a number, ``1.1.0``,
is compared as text). Booleans: ``true``, ``false`` and their case variants (``True``, ``FALSE``)
match JSON booleans, and a text only when it is the value as written (``active=True`` matches the
text ``"True"``, not ``"true"``); ``yes``, ``no``, ``1`` and ``0`` are never booleans. A list matches
any operator when an item of it does; an object, and an item that is a list or an object, matches
no value (nor its JSON text).

The empty value is written quoted, ``author=""``; ``author=`` with nothing after it is a usage
error (``-f "author=$NAME"`` with NAME unset would otherwise filter for the empty author). ``null``
is JSON null as ``true`` and ``false`` are booleans and digits numbers: ``page=null`` matches a
chunk whose ``page`` is null (or the text ``null``); ``!page`` matches a chunk without a page at all
too.

A comparison's number must be finite (``1e999``, ``inf`` and ``nan`` are usage errors, not text)
and not so small that a 64-bit float holds it as 0 (``1e-999999``);
an ``in`` list must have values and no empty one (``key in ,`` is a usage error). Full-width digits
(``k>=１２``) are read as the ASCII number; a value in digits of another script is compared as text.

Dates: extraction stores datetimes in UTC as ``2024-05-01T12:00:00Z`` and dates as
``2024-05-01``, which sort correctly as text. A filter's datetime with an offset is converted to UTC
the same way, and a bare date means the whole day: ``date<=2024-05-01`` includes
``2024-05-01T12:00:00Z`` (it becomes ``< 2024-05-02``) and ``date>2024-05-01`` excludes it
(``>= 2024-05-02``). An impossible date (``2024-02-30``), and one that leaves years 1..9999 in
UTC (``0001-01-01T00:00+14:00``, ``date<=9999-12-31``), is a usage error.

Keys are any top-level metadata key (a dot is part of a key's name: ``a.b`` is the key ``"a.b"``,
never a path into an object, which no filter reaches); ``source_type``, ``path``, ``uri``, ``title``, ``author``, ``date`` and
``tags`` are set by extraction. Values are always bound as parameters, never spliced into SQL.
"""

from __future__ import annotations

import math
import re
import unicodedata
from decimal import Decimal

from ..errors import UsageError, echo
from ..types import Filter, quote_value

__all__ = ["Filter", "check_text", "parse_filter", "parse_filters", "quote_value"]

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_KEY_HINT = "a key starts with a letter or _, then ASCII letters, digits, _ . - (64 characters at most)"
# What a comparison reads as a number (``kbctl.store.filters`` compares it as one): it must be finite.
_NUMERIC = re.compile(r"^[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|nan|inf|infinity)$", re.IGNORECASE | re.ASCII)
_FORM = re.compile(r"^\s*(?P<key>[^\s=!<>~]+)\s*(?P<op>!=|>=|<=|=|>|<|~|\s+in\s+)\s*(?P<value>.*?)\s*$")
_BARE = re.compile(r"^\s*(?P<not>!?)\s*(?P<key>[^\s=!<>~'\"]+)\s*$")  # key, !key
# A quoted value or item: the same quote at both ends, doubled inside; then only spaces and the
# list's comma (``in``) or the end.
_QUOTED = {q: re.compile(f"{q}((?:[^{q}]|{q}{q})*){q}\\s*") for q in "\"'"}
_SYNTAX = (
    "use key=value, key!=value, key>=value, key<=value, key>value, key<value, key~prefix, 'key in a,b',"
    ' key (has a value) or !key (has none); quote a value with spaces: key="a b"'
)


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
    """Parse one filter (the syntax above); a malformed one is a UsageError with the syntax."""
    check_text("filter", text)
    bare = _BARE.match(text)
    if bare:
        if not _KEY.match(bare.group("key")):
            raise UsageError(f"invalid filter key {echo(bare.group('key'))}", hint=_KEY_HINT)
        return Filter(bare.group("key"), "!exists" if bare.group("not") else "exists", "")
    m = _FORM.match(text)
    if not m:
        raise UsageError(f"cannot read filter {echo(text)}", hint=_SYNTAX)
    key, op, value = m.group("key"), m.group("op").strip(), m.group("value")
    if not _KEY.match(key):
        raise UsageError(f"invalid filter key {echo(key)}", hint=_KEY_HINT)
    if op == "in":
        items = _items(text, value)
        if not items or any(v is None for v in items):
            raise UsageError(
                f"filter {echo(text)}: an 'in' list needs values, none of them empty",
                hint="write 'key in a,b,c' (an empty value quoted: 'key in \"\",b')",
            )
        return Filter(key, "in", tuple(v for v in items if v is not None))
    if not value:
        raise UsageError(
            f"filter {echo(text)} has no value",
            hint=f'write {key}{op}"" for the empty value (in a shell: \'{key}{op}""\'), !{key} for no value at all',
        )
    if value[0] in "=<>":
        raise _operator_typo(text, key, op, value)
    value = _unquoted(text, value)
    if op in ("<", "<=", ">", ">="):
        value = _ascii_number(value)
    if op in ("<", "<=", ">", ">=") and _NUMERIC.match(value) and not math.isfinite(float(value)):
        raise UsageError(
            f"filter {echo(text)}: {echo(value)} is not a finite number",
            hint="compare with a number such as 10, -2.5 or 1e6",
        )
    if op in ("<", "<=", ">", ">=") and _NUMERIC.match(value) and float(value) == 0 and Decimal(value) != 0:
        raise UsageError(
            f"filter {echo(text)}: {echo(value)} is too small a number (a 64-bit float holds it as 0)",
            hint="compare with a number such as 10, -2.5 or 1e-6 (at least 1e-300 unless 0)",
        )
    return Filter(key, op, value)


def _unquoted(text: str, value: str) -> str:
    """``value`` (stripped, not empty) without its quoting, when it begins with a quote."""
    if value[0] not in _QUOTED:
        return value
    m = _QUOTED[value[0]].fullmatch(value)
    if not m:
        raise _unclosed(text, value[0])
    return m.group(1).replace(value[0] * 2, value[0])


def _items(text: str, value: str) -> list[str | None]:
    """The items of an ``in`` list, each unquoted; None for an empty unquoted item."""
    items: list[str | None] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i].isspace():
            i += 1
        if i < n and value[i] in _QUOTED:
            q = value[i]
            m = _QUOTED[q].match(value, i)
            if not m or (m.end() < n and value[m.end()] != ","):
                raise _unclosed(text, q)
            items.append(m.group(1).replace(q * 2, q))
            i = m.end()
        else:
            j = value.find(",", i)
            j = n if j < 0 else j
            items.append(value[i:j].strip() or None)
            i = j
        if i >= n:
            return items
        i += 1  # the comma


# Operators of other languages, as kbctl writes them: ``title==x`` read as ``title = "=x"``
# matched nothing, ``title<>x`` compared titles with the text "> x".
_OTHER_OPERATORS = {"==": "=", "===": "=", "<>": "!=", "!==": "!=", "=>": ">=", "=<": "<=", ">==": ">=", "<==": "<="}


def _operator_typo(text: str, key: str, op: str, value: str) -> UsageError:
    typed = op + value[: len(value) - len(value.lstrip("=<>!"))]
    meant = _OTHER_OPERATORS.get(typed.replace(" ", ""))
    said = f"write {key}{meant}VALUE for {typed!r}; " if meant else ""
    return UsageError(
        f"filter {echo(text)}: its value begins with {value[0]!r}, an operator's character",
        hint=f"{said}a value that begins with = < or > is quoted ({key}{op}{quote_value(value)[:80]})",
    )


def _unclosed(text: str, q: str) -> UsageError:
    other = "'" if q == '"' else '"'
    return UsageError(
        f"filter {echo(text)}: a value that begins with {q} is quoted, and its quote does not close at its end",
        hint=f"inside a quoted value a {q} is doubled ({q}say {q}{q}hi{q}{q}{q}), or quote with {other};"
        f" a value that begins with a quote is written quoted ({other}{q}x{q}{other})",
    )


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
