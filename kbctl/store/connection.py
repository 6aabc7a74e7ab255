"""The type of the connections the store's functions take (psycopg's, rows as tuples), and the
few helpers that read a row the statement always returns."""

from __future__ import annotations

from typing import Any, TypeAlias

from psycopg import Connection, Cursor

from ..errors import DatabaseError

__all__ = ["Conn", "Cur", "one", "scalar", "columns"]

#: A psycopg connection (``Database.connect``, a tenant's or a side connection of the API).
Conn: TypeAlias = Connection[Any]
#: A cursor of one (``conn.cursor()``, for ``COPY`` and ``executemany``).
Cur: TypeAlias = Cursor[Any]


def one(cursor: Cur) -> Any:
    """The first row of a statement that always returns one (a count, an aggregate, a RETURNING)."""
    row = cursor.fetchone()
    if row is None:
        raise DatabaseError("a statement that returns a row returned none")
    return row


def scalar(cursor: Cur) -> Any:
    """The first value of the first row of a statement that always returns a row."""
    return one(cursor)[0]


def columns(cursor: Cur) -> list[str]:
    """The names of the columns of the statement ``cursor`` executed."""
    return [c.name for c in cursor.description or ()]
