"""Named queries: the statements in ``sql/queries/<group>/<name>.sql``, read once (and where ``sql/`` is).

A static query is used as it is, with ``%s`` parameters. A template also holds ``{placeholders}``
for its dynamic parts (a filter condition, an index name, a dimension), filled with
``psycopg.sql`` objects only, so no value is ever spliced into SQL text.
"""

from __future__ import annotations

from pathlib import Path

from psycopg import sql

from ..errors import MigrationError

__all__ = ["query", "template", "load_query", "sql_dir"]


def sql_dir() -> Path:
    """``sql/`` as shipped in the wheel (``kbctl/sql``) or at the top of a source checkout."""
    here = Path(__file__).resolve().parents[1]
    for p in (here / "sql", here.parent / "sql"):
        if (p / "migrations").is_dir():
            return p
    raise MigrationError("the sql/ directory is missing from this installation", hint="reinstall kbctl")


_QUERIES: dict[str, str] = {}


def load_query(name: str) -> str:
    """A named static query from ``sql/queries/NAME.sql`` (read once)."""
    if name not in _QUERIES:
        _QUERIES[name] = (sql_dir() / "queries" / f"{name}.sql").read_text()
    return _QUERIES[name]


def query(name: str) -> str:
    """The static query ``name`` (e.g. ``"runs/start_run"``)."""
    return load_query(name)


def template(name: str, /, **parts: sql.Composable) -> sql.Composed:
    """The template ``name`` with its placeholders filled by ``parts``."""
    return sql.SQL(load_query(name)).format(**parts)
