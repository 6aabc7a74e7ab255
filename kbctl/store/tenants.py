"""Tenants in PostgreSQL (migration 009): a NOLOGIN role per tenant, and the role a connection acts as.

Every table of corpus, run, audit and agent data is under row-level security keyed by tenant,
forced on the tables' owner too. kbctl connects as the owner (a superuser, embedded), migrates,
then ``SET ROLE``s each connection it opens for a tenant to that tenant's role (``enter``), so its
statements see and write that tenant's rows only. Administration (``kbctl tenants``, ``kbctl db``)
runs as the owner; what the owner alone may do inside a tenant's work (record a profile and build
its HNSW index) runs under ``as_owner``.
"""

from __future__ import annotations

from psycopg import sql

from ..errors import DatabaseError
from .connection import Conn, scalar
from .namespaces import delete_namespace, namespace_ids
from .queries import query, template
from .roles import as_owner, as_role, enter

__all__ = [
    "create_tenant",
    "tenant_role",
    "tenant_id_key",
    "list_tenants",
    "enter",
    "as_role",
    "as_owner",
    "delete_tenant",
]


def create_tenant(conn: Conn, tenant: str) -> str:
    """Register ``tenant`` and create its role (idempotent, safe when several processes first use
    the same tenant at once: serialized by an advisory lock); the role's name. Needs CREATEROLE:
    without it, a DatabaseError in one line naming the privilege (``kbctl.store.capabilities``)."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute(query("tenants/lock"), (tenant,))
            return str(scalar(conn.execute(query("tenants/create"), (tenant,))))
    except psycopg.errors.InsufficientPrivilege:
        from . import capabilities

        caps = capabilities.of(conn)
        if caps.may_create_roles:
            raise
        raise DatabaseError(
            f"the login {caps.login} may not create roles, so tenant {tenant!r} cannot be created",
            hint=f"give it CREATEROLE (ALTER ROLE {caps.login} CREATEROLE, as a superuser), then retry",
        ) from None


def tenant_role(conn: Conn, tenant: str) -> str | None:
    """The role of a registered tenant, else None."""
    row = conn.execute(query("tenants/role"), (tenant,)).fetchone()
    return str(row[0]) if row else None


def tenant_id_key(conn: Conn, tenant: str) -> bytes | None:
    """The key of a registered tenant's opaque ids (migration 018), else None: the owner reads any
    tenant's, a tenant's role its own only."""
    row = conn.execute(query("tenants/id_key"), (tenant,)).fetchone()
    return bytes(row[0]) if row else None


def list_tenants(conn: Conn) -> list[dict]:
    """The registered tenants the connection's role may see: name, role, created_at."""
    cur = conn.execute(query("tenants/list"))
    return [{"name": n, "role": r, "created_at": t.isoformat()} for n, r, t in cur]


def delete_tenant(conn: Conn, tenant: str) -> dict | None:
    """Delete a tenant's namespaces and rows (as its role), unregister it and drop its role.

    Returns what went (``namespaces``), or None when the tenant is not registered.
    """
    role = tenant_role(conn, tenant)
    if role is None:
        return None
    with as_role(conn, role):
        names = [r[0] for r in conn.execute(query("namespaces/names_of_tenant"), (tenant,))]
        for name in names:
            delete_namespace(conn, name, tenant)
        with conn.transaction():
            conn.execute(query("tenants/delete_tenant_rows"), (tenant, tenant, tenant))
        left = namespace_ids(conn, tenant)
    with conn.transaction():
        conn.execute(query("tenants/unregister"), (tenant,))
        conn.execute(template("tenants/drop_role", role=sql.Identifier(role)))
    return {"tenant": tenant, "role": role, "namespaces": len(names) - len(left)}
