"""Named queries: the statements in ``sql/queries/<group>/<name>.sql``, read once.

A static query is used as it is, with ``%s`` parameters. A template also holds ``{placeholders}``
for its dynamic parts (a filter condition, an index name, a dimension), filled with
``psycopg.sql`` objects only, so no value is ever spliced into SQL text.
"""

from __future__ import annotations

from psycopg import sql

from ..db import load_query

__all__ = ["query", "template"]


def query(name: str) -> str:
    """The static query ``name`` (e.g. ``"runs/start_run"``)."""
    return load_query(name)


def template(name: str, /, **parts: sql.Composable) -> sql.Composed:
    """The template ``name`` with its placeholders filled by ``parts``."""
    return sql.SQL(load_query(name)).format(**parts)
