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

__all__ = ["filter_sql"]

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


def filter_sql(filters: tuple[Filter, ...], alias: str = "c") -> tuple[sql.Composable, list]:
    """``AND``-joined SQL conditions on the metadata of the chunks ``<alias>`` and their parameters
    (``TRUE`` for none). A fetch fact (``kbctl.types.FETCH_FACTS``: ``size``, ``mtime``,
    ``fetched_at``…) is read from the chunk's document's row, where it is kept (a chunk carries
    none of its source's), and any other key from the chunk's own metadata."""
    parts: list[sql.Composable] = []
    params: list = []
    col = sql.SQL("{}.metadata").format(sql.Identifier(alias))
    for f in filters:
        if f.key in FETCH_FACTS:
            cond, p = _one(sql.SQL("fd.metadata"), f)
            cond = _OF_DOCUMENT.format(a=sql.Identifier(alias), f=cond)
        else:
            cond, p = _one(col, f)
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
    if isinstance(f.value, tuple):  # "in": the only operator with several values
        vals = list(f.value)
        has, hp = _contains_any(col, f.key, vals)
        null, np = _null(col, f.key, vals)
        null, np = _and_items(col, f.key, vals, null, np)
        return (
            sql.SQL("({h} AND ({c} -> %s ?| %s::text[] OR {c} ->> %s = ANY(%s::text[]){n}))").format(
                h=has, c=col, n=null
            ),
            [*hp, f.key, vals, f.key, vals, *np],
        )
    value = f.value
    null, np = _and_items(col, f.key, [value], *_null(col, f.key, [value]))
    if f.op == "=":
        has, hp = _contains_any(col, f.key, [value])
        return sql.SQL("({h} AND ({c} -> %s ? %s OR {c} ->> %s = %s{n}))").format(h=has, c=col, n=null), [
            *hp,
            f.key,
            value,
            f.key,
            value,
            *np,
        ]
    if f.op == "!=":
        return (
            sql.SQL("NOT coalesce({c} -> %s ? %s OR {c} ->> %s = %s{n}, false)").format(c=col, n=null),
            [f.key, value, f.key, value, *np],
        )
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
    op = sql.SQL(f.op)
    if _NUMBER.match(value):
        # a JSON number, or a text that is a decimal number (front matter's `year: "2024"`, an HTML
        # meta, a document property): `=` matched it, and `>=` read it as no number at all
        return (
            sql.SQL(
                "(CASE jsonb_typeof({c} -> %s) WHEN 'number' THEN ({c} ->> %s)::numeric"
                " WHEN 'string' THEN CASE WHEN ({c} ->> %s) ~ %s THEN ({c} ->> %s)::numeric END END)"
                " {op} %s::numeric"
            ).format(c=col, op=op),
            [f.key, f.key, f.key, _NUMERIC_TEXT, f.key, value],
        )
    cmp, bound = _date_bound(f, value)
    return sql.SQL("({c} ->> %s) {op} %s").format(c=col, op=sql.SQL(cmp)), [f.key, bound]


def _null(col: sql.Composable, key: str, values: list[str]) -> tuple[sql.Composable, list]:
    """`` OR <key is JSON null>`` when ``null`` is among the values (``key=null``), else nothing:
    null is read as JSON null, as ``true`` and ``false`` are read as booleans."""
    if "null" not in values:
        return sql.SQL(""), []
    return sql.SQL(" OR jsonb_typeof({c} -> %s) = 'null'").format(c=col), [key]


def _and_items(
    col: sql.Composable, key: str, values: list[str], null: sql.Composable, params: list
) -> tuple[sql.Composable, list]:
    """``null`` (``_null``'s condition) followed by `` OR <an item of the key's list matches>``: an item
    matches a value as the key's own value would (its text, a number's or a boolean's digits or
    word, null for ``null``), so ``flags=true``, ``n=1`` and ``k=null`` match ``[true]``, ``[1]``
    and ``[null]`` as ``tags=billing`` matches ``["billing"]``; an item that is a list or an object
    matches nothing."""
    cond = sql.SQL(
        "{n} OR (jsonb_typeof({c} -> %s) = 'array' AND EXISTS (SELECT 1 FROM jsonb_array_elements({c} -> %s) AS item(v)"
        " WHERE CASE jsonb_typeof(item.v) WHEN 'null' THEN %s WHEN 'array' THEN false WHEN 'object' THEN false"
        " ELSE item.v #>> '{{}}' = ANY(%s::text[]) END))"
    ).format(n=null, c=col)
    return cond, [*params, key, key, "null" in values, values]


def _contains_any(col: sql.Composable, key: str, values: list[str]) -> tuple[sql.Composable, list]:
    """``metadata @> …`` alternatives that the GIN (jsonb_path_ops) index answers.

    They find the rows whose ``key`` is the value as a string, number or boolean, or an array that
    holds it: a superset of what ``=`` / ``in`` match, which the exact condition next to them then
    narrows. Without them an equality filter reads every chunk of the namespace (figures in
    docs/benchmarks.md).
    """
    docs = []
    for v in values:
        scalars: list = [v]
        if _NUMBER.match(v) and math.isfinite(float(v)):  # "x=1e999" can only match the text
            scalars.append(int(v) if v.lstrip("+-").isdigit() else float(v))
        elif v in ("true", "false"):
            scalars.append(v == "true")
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
