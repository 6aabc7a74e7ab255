"""Metadata filters (``kbctl.types.Filter``) compiled to SQL conditions on ``chunks.metadata``
(and, for a fetch fact, on its document's ``documents.metadata``).

What each operator means (numbers compared as numbers, ISO dates as the whole day) is documented
with the syntax in ``kbctl.search.filters``. Values are always bound as parameters, never spliced
into SQL; the key is a parameter too.
"""

from __future__ import annotations

import json
import math
import re

from psycopg import sql

from ..errors import UsageError
from ..types import FETCH_FACTS, Filter

__all__ = ["filter_sql", "narrowable", "lookup_of"]

# ASCII digits only: PostgreSQL's numeric reads no others (kbctl.search.filters turns full-width
# digits into ASCII ones; digits of other scripts are compared as text).
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$", re.ASCII)  # finite (kbctl.search.filters)
# A text that a comparison reads as a number, in PostgreSQL's regular expressions: ASCII digits, no
# spaces, and no more than numeric holds (255 digits a part at most: the most a PostgreSQL repetition
# counts; an exponent of three digits at most).
_NUMERIC_TEXT = r"^[+-]?([0-9]{1,255}(\.[0-9]{0,255})?|\.[0-9]{1,255})([eE][+-]?[0-9]{1,3})?$"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(?P<time>[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$", re.ASCII)


# A condition on the metadata of the chunk's document (one row by its key: a chunk has one document).
_OF_DOCUMENT = sql.SQL(
    "EXISTS (SELECT FROM kbctl.documents fd WHERE fd.namespace_id = {a}.namespace_id AND fd.id = {a}.document_id AND {f})"
)


# The chunks of a filter's entries in kbctl.metadata_values (migration 024): a superset of what its
# exact condition keeps, looked up by the leakproof text equality the tenants' policy lets an index
# serve. The exact condition always follows it.
_OF_ENTRIES = sql.SQL(
    "EXISTS (SELECT FROM kbctl.metadata_values mv WHERE mv.namespace_id = {a}.namespace_id AND mv.chunk_id = {a}.id"
    " AND mv.key = left(%s, 200) AND mv.value = ANY(kbctl.metadata_lookup(%s::text[], %s::text[])))"
)


def narrowable(f: Filter) -> bool:
    """Whether ``f`` can be narrowed through kbctl.metadata_values: ``=`` and ``in`` on a key of the
    chunk's metadata (``!=`` keeps what the entries do not hold; a fetch fact is the document's)."""
    return f.op in ("=", "in") and f.key not in FETCH_FACTS


def lookup_of(f: Filter) -> list:
    """The parameters of ``f``'s lookup in kbctl.metadata_values: its key, the texts (each value, and
    ``true`` / ``false`` for a value that is a boolean in any case) and the numbers (the values that
    read as one, whose canonical numeric text is looked up)."""
    vals = list(f.value) if isinstance(f.value, tuple) else [f.value]
    assert all(isinstance(v, str) for v in vals)
    texts = sorted({*vals, *(v.lower() for v in vals if v.lower() in ("true", "false"))})
    numbers = sorted({n for n in (_numeric(v) for v in vals) if n is not None})
    return [f.key, texts, numbers]


def filter_sql(filters: tuple[Filter, ...], alias: str = "c", narrow: int | None = None) -> tuple[sql.Composable, list]:
    """``AND``-joined SQL conditions on the metadata of the chunks ``<alias>`` and their parameters
    (``TRUE`` for none). A fetch fact (``kbctl.types.FETCH_FACTS``: ``size``, ``mtime``,
    ``fetched_at``…) is read from the chunk's document's row, where it is kept (a chunk carries
    none of its source's), and any other key from the chunk's own metadata.

    ``narrow``: the index of a ``narrowable`` filter whose condition first looks its chunks up in
    kbctl.metadata_values (index-only, under the tenant's policy), then keeps its exact condition:
    the same rows, read through the index (``kbctl.store.search`` decides when)."""
    parts: list[sql.Composable] = []
    params: list = []
    col = sql.SQL("{}.metadata").format(sql.Identifier(alias))
    for i, f in enumerate(filters):
        if f.key in FETCH_FACTS:
            cond, p = _one(sql.SQL("fd.metadata"), f)
            cond = _OF_DOCUMENT.format(a=sql.Identifier(alias), f=cond)
        else:
            cond, p = _one(col, f)
        if i == narrow:
            assert narrowable(f), f"filter {f} cannot be narrowed"
            cond = sql.SQL("({e} AND {c})").format(e=_OF_ENTRIES.format(a=sql.Identifier(alias)), c=cond)
            p = [*lookup_of(f), *p]
        parts.append(cond)
        params.extend(p)
    if not parts:
        return sql.SQL("TRUE"), []
    return sql.SQL(" AND ").join(parts), params


def _one(col: sql.Composable, f: Filter) -> tuple[sql.Composable, list]:
    if f.op in ("exists", "!exists"):  # a value (not null; "" is one), or none: missing or null
        return (
            sql.SQL("coalesce(jsonb_typeof({c} -> %s), 'null') {op} 'null'").format(
                c=col, op=sql.SQL("<>" if f.op == "exists" else "=")
            ),
            [f.key],
        )
    if f.op in ("=", "!=", "in"):
        vals = list(f.value) if isinstance(f.value, tuple) else [f.value]
        equal, ep = _equals(col, f.key, vals)
        if f.op == "!=":
            return sql.SQL("NOT coalesce({e}, false)").format(e=equal), ep
        if any(_numeric(v) for v in vals):  # a numeric text of any form matches: no superset the index holds
            return equal, ep
        has, hp = _contains_any(col, f.key, vals)
        return sql.SQL("({h} AND {e})").format(h=has, e=equal), [*hp, *ep]
    value = f.value
    assert isinstance(value, str)
    if f.op == "~":
        # A string or number that starts with the prefix, or a list (tags, heading_path) with such an
        # item: never the JSON text of a list or an object (``tags~[`` matched every tagged chunk).
        prefix = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return (
            sql.SQL(
                "(CASE jsonb_typeof({c} -> %s)"
                " WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements({c} -> %s) AS item(v)"
                " WHERE jsonb_typeof(item.v) IN ('string', 'number') AND item.v #>> '{{}}' LIKE %s)"
                " WHEN 'string' THEN ({c} ->> %s) LIKE %s WHEN 'number' THEN ({c} ->> %s) LIKE %s"
                " ELSE false END)"
            ).format(c=col),
            [f.key, f.key, prefix, f.key, prefix, f.key, prefix],
        )
    # > >= < <=: the key's value, or an item of its list (as = matches one); never a list's or an
    # object's JSON text (``tags<a`` matched every list: '["' sorts first)
    if _NUMBER.match(value):
        # a JSON number, or a text that is a decimal number (front matter's `year: "2024"`, an HTML
        # meta, a document property): `=` matched it, and `>=` read it as no number at all
        return _any_item(col, f.key, _NUMBER_OF + f" {f.op} %s::numeric", [_NUMERIC_TEXT, value])
    cmp, bound = _date_bound(f, value)
    return _any_item(
        col,
        f.key,
        "(CASE WHEN jsonb_typeof({x}) IN ('string', 'number', 'boolean') THEN {x} #>> '{}' END) " + cmp + " %s",
        [bound],
    )


# A jsonb value's number: a JSON number's, or a string's that is a decimal number (``_NUMERIC_TEXT``,
# bound to its %s); else NULL.
_NUMBER_OF = (
    "(CASE jsonb_typeof({x}) WHEN 'number' THEN ({x} #>> '{}')::numeric"
    " WHEN 'string' THEN CASE WHEN ({x} #>> '{}') ~ %s THEN ({x} #>> '{}')::numeric END END)"
)


def _fill(text: str, x: sql.Composable, xp: list, args: list) -> tuple[sql.Composable, list]:
    """``text`` with each ``{x}`` the jsonb expression ``x`` (its parameters ``xp``) and each ``%s``
    the next of ``args``: the parameters in the order the statement holds them."""
    parts: list[sql.Composable] = []
    params: list = []
    rest = list(args)
    for token in re.split(r"(\{x\}|%s)", text):
        if token == "{x}":
            parts.append(x)
            params += xp
        elif token == "%s":
            parts.append(sql.SQL("%s"))
            params.append(rest.pop(0))
        elif token:
            parts.append(sql.SQL(token))
    assert not rest, "more arguments than %s"
    return sql.Composed(parts), params


def _any_item(col: sql.Composable, key: str, cond: str, args: list) -> tuple[sql.Composable, list]:
    """``cond`` (a condition on a jsonb value ``{x}``, its ``%s`` bound to ``args``) holds for the
    key's value, or, when that is a list, for an item of it (an item that is itself a list or an
    object is tested as a value, so ``cond`` decides); false for a missing key or NULL."""
    value = sql.SQL("({c} -> %s)").format(c=col)
    on_value, vp = _fill(cond, value, [key], args)
    on_item, ip = _fill(cond, sql.SQL("item.x"), [], args)
    return (
        sql.SQL(
            "coalesce(CASE jsonb_typeof({v}) WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements({v})"
            " AS item(x) WHERE {i}) ELSE {s} END, false)"
        ).format(v=value, i=on_item, s=on_value),
        [key, key, *ip, *vp],
    )


def _equals(col: sql.Composable, key: str, values: list[str]) -> tuple[sql.Composable, list]:
    """The key's value, or an item of its list, equals one of ``values``: a string or a number
    whose text is one of them; a number, or a text that is a decimal number, numerically equal to
    one that reads as a number (``rating=4.50``: 4.5 and "4.5"); a boolean written as one of them
    in any case (``active=True``); JSON null for ``null``. An object, and an item that is a list or
    an object, equals nothing."""
    numbers = [n for n in (_numeric(v) for v in values) if n is not None]
    words = sorted({v.lower() for v in values if v.lower() in ("true", "false")})
    text = "({x} #>> '{}') = ANY(%s::text[])"
    on_string, on_number = text, text
    args: list = [values]
    if numbers:
        on_string += (
            " OR coalesce(CASE WHEN ({x} #>> '{}') ~ %s THEN ({x} #>> '{}')::numeric = ANY(%s::numeric[]) END, false)"
        )
        on_number += " OR ({x} #>> '{}')::numeric = ANY(%s::numeric[])"
        args += [_NUMERIC_TEXT, numbers, values, numbers]
    else:
        args += [values]
    cond = (
        f"CASE jsonb_typeof({{x}}) WHEN 'string' THEN {on_string} WHEN 'number' THEN {on_number}"
        " WHEN 'boolean' THEN ({x} #>> '{}') = ANY(%s::text[]) WHEN 'null' THEN %s ELSE false END"
    )
    return _any_item(col, key, cond, [*args, words, "null" in values])


def _numeric(value: str) -> str | None:
    """``value`` when it reads as a number PostgreSQL's numeric holds (ASCII digits, finite, not so
    small that it underflows: ``1e-999999``), else None: an equality with it is then text only."""
    if not _NUMBER.match(value):
        return None
    x = float(value)
    if not math.isfinite(x) or (x == 0 and any(d in "123456789" for d in value.lower().split("e")[0])):
        return None
    return value


def _contains_any(col: sql.Composable, key: str, values: list[str]) -> tuple[sql.Composable, list]:
    """``metadata @> …`` alternatives: the rows whose ``key`` is the value as a string, number or
    boolean, or an array that holds it, a superset of what ``=`` / ``in`` match, which the exact
    condition next to them then narrows. They were for the GIN (jsonb_path_ops) index, which no
    search as a tenant could use (``@>`` is not leakproof) and migration 024 dropped; they stay as
    the first test of a row. The index a search uses is kbctl.metadata_values (``_OF_ENTRIES``).
    """
    docs = []
    for v in values:
        scalars: list = [v]
        if _NUMBER.match(v) and math.isfinite(float(v)):  # "x=1e999" can only match the text
            scalars.append(int(v) if v.lstrip("+-").isdigit() else float(v))
        elif v.lower() in ("true", "false"):  # True, TRUE: the booleans too (``_equals``)
            scalars.append(v.lower() == "true")
        elif v == "null":
            scalars.append(None)
        for x in scalars:
            docs += [json.dumps({key: x}), json.dumps({key: [x]})]
    cond = sql.SQL(" OR ").join(sql.SQL("{c} @> %s::jsonb").format(c=col) for _ in docs)
    return sql.SQL("({})").format(cond), docs


def _date_bound(f: Filter, value: str) -> tuple[str, str]:
    """The comparison and bound for an ISO date or datetime ``value`` of ``f`` (others are returned as they are)."""
    from datetime import date, datetime, timedelta

    from ..textutil.dates import iso_datetime

    m = _ISO.match(value)
    if not m:
        return f.op, value
    try:
        if not m.group("time"):
            day = date.fromisoformat(value)
            if f.op in ("<=", ">"):  # the whole day is "at or before" it, none of it "after" it
                return ("<" if f.op == "<=" else ">="), (day + timedelta(days=1)).isoformat()
            return f.op, day.isoformat()
        dt = datetime.fromisoformat(value.replace(" ", "T", 1))
        return f.op, iso_datetime(dt)  # the form extraction stores: UTC with a Z when an offset is given
    except ValueError:
        raise UsageError(
            f"{value!r} in filter {str(f)!r} is not a valid date",
            hint="use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|±HH:MM]",
        ) from None
    except OverflowError:  # in UTC (or the day after) it falls outside years 1..9999
        raise UsageError(
            f"date {value!r} in filter {str(f)!r} is out of range: in UTC it falls outside years 1 to 9999",
            hint="use a date within years 1..9999 (its UTC time included)",
        ) from None
