"""The role a connection acts as: a tenant's (``enter``), another for a block (``as_role``), or the
login's, the tables' owner (``as_owner``). Row-level security holds every statement to the policies
of the role it runs as (``kbctl.store.tenants``, migration 009)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg import sql

from ..errors import TenantNotFound
from .connection import Conn, scalar
from .queries import query, template

__all__ = ["enter", "as_role", "as_owner", "deleted", "check_registered", "tenant_gone_said"]


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


def deleted(tenant: str) -> TenantNotFound:
    """The refusal of a deleted tenant's name (``kbctl tenants create`` makes it again)."""
    return TenantNotFound(
        f"tenant {tenant!r} was deleted",
        hint=f"a deleted tenant is not made again on its next use; to use the name again (an empty store): kbctl tenants create {tenant}",
    )


def check_registered(conn: Conn, tenant: str) -> None:
    """Refuse (``deleted``) unless ``tenant`` is registered, read as the connection's role: a
    tenant's role sees its own row, a connection still acting as a role its delete dropped sees
    none. Called under the tenant's lock, so a delete is wholly before the read or after the caller."""
    try:
        row = conn.execute(query("tenants/role"), (tenant,)).fetchone()
    except psycopg.errors.InsufficientPrivilege:  # the connection acts as the role the delete dropped
        row = None
    if row is None:
        raise deleted(tenant)


@contextmanager
def tenant_gone_said(conn: Conn, tenant: str | None) -> Iterator[None]:
    """Inside the block, a statement refused because the connection acts as a role dropped since
    (its tenant deleted under it: ``permission denied for schema kbctl``) is reported as the
    tenant deleted (``TenantNotFound``), as every writer reports it; any other error as it is."""
    try:
        yield
    except psycopg.errors.InsufficientPrivilege:
        if tenant is not None:
            check_registered(conn, tenant)
        raise
