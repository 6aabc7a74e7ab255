"""The role a connection acts as: a tenant's (``enter``), another for a block (``as_role``), or the
login's, the tables' owner (``as_owner``). Row-level security holds every statement to the policies
of the role it runs as (``kbctl.store.tenants``, migration 009)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from psycopg import sql

from .connection import Conn, scalar
from .queries import query, template

__all__ = ["enter", "as_role", "as_owner"]


def enter(conn: Conn, role: str) -> None:
    """Act as ``role`` from now on (every later statement is held to its policies)."""
    conn.execute(template("tenants/set_role", role=sql.Identifier(role)))


@contextmanager
def as_role(conn: Conn, role: str) -> Iterator[None]:
    """Act as ``role`` inside the block, then as the role the connection acted as before."""
    before = scalar(conn.execute(query("tenants/current_role")))
    enter(conn, role)
    try:
        yield
    finally:
        enter(conn, before)


@contextmanager
def as_owner(conn: Conn) -> Iterator[None]:
    """Act as the role the connection logged in as (the owner) inside the block."""
    before = scalar(conn.execute(query("tenants/current_role")))
    conn.execute(query("tenants/reset_role"))
    try:
        yield
    finally:
        enter(conn, before)
