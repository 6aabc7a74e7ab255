"""Tenants in PostgreSQL (migration 009): a NOLOGIN role per tenant, and the role a connection acts as.

Every table of corpus, run, audit and agent data is under row-level security keyed by tenant,
forced on the tables' owner too. kbctl connects as the owner (a superuser, embedded), migrates,
then ``SET ROLE``s each connection it opens for a tenant to that tenant's role (``enter``), so its
statements see and write that tenant's rows only. Administration (``kbctl tenants``, ``kbctl db``)
runs as the owner; what the owner alone may do inside a tenant's work (record a profile and build
its HNSW index) runs under ``as_owner``.

A tenant is made by ``create_tenant`` (``kbctl tenants create``) or, where the session allows it
(embedded, a verb that writes), by its name's first use (``role_for_use``); a read never makes one. A deleted tenant stays deleted: its name is
recorded (migration 020) and no first use makes it again; only ``create_tenant`` does.
"""

from __future__ import annotations

from psycopg import sql

from ..errors import DatabaseError, TenantNotFound
from .connection import Conn, scalar
from .generations import drop_generation_indexes
from .namespaces import remove_namespace
from .queries import query, template
from .roles import as_owner, as_role, deleted, enter

__all__ = [
    "create_tenant",
    "role_for_use",
    "role_to_plan",
    "NO_TENANT",
    "deleted_at",
    "deleted",
    "tenant_role",
    "tenant_id_key",
    "list_tenants",
    "known",
    "enter",
    "as_role",
    "as_owner",
    "delete_tenant",
]


def create_tenant(conn: Conn, tenant: str) -> str:
    """Register ``tenant`` and create its role (idempotent, safe when several processes first use
    the same tenant at once: serialized by an advisory lock); the role's name. A deleted tenant is
    made again (empty, with a new role and id key). Needs CREATEROLE: without it, a DatabaseError
    in one line naming the privilege (``kbctl.store.capabilities``)."""
    return _made(conn, tenant, again=True)


def role_for_use(conn: Conn, tenant: str, *, create: bool) -> str:
    """The role a connection of ``tenant`` acts as: the registered tenant's. An unregistered one is
    made on this first use when ``create`` (the embedded server, for a verb that writes: nothing to
    set up), unless it was deleted; a deleted tenant, or (without ``create``: a read, or any use by
    DSN) one never made, is a ``TenantNotFound`` naming the known tenants, and nothing is made."""
    role = tenant_role(conn, tenant)
    if role is not None:
        return role
    if not create:
        if deleted_at(conn, tenant) is not None:
            raise deleted(tenant)
        raise TenantNotFound(f"tenant {tenant!r} does not exist", hint=_known(conn, tenant))
    return _made(conn, tenant, again=False)


# The role every tenant's role is a member of (migration 009: it holds the table privileges) and that
# is no tenant's: ``kbctl.current_tenant()`` is NULL for it, so every policy shows it no rows.
NO_TENANT = "kbctl_tenant"


def role_to_plan(conn: Conn, tenant: str, *, create: bool) -> str:
    """The role a plan (``kbctl ingest --plan``) of ``tenant`` reads as, making nothing: the
    registered tenant's; for one its first use would make (``create``: embedded, never made, not
    deleted), ``NO_TENANT``, which sees no rows, as the tenant once made holds none. Else refused as
    ``role_for_use`` refuses a read (``TenantNotFound``)."""
    role = tenant_role(conn, tenant)
    if role is not None:
        return role
    if create and deleted_at(conn, tenant) is None:
        return NO_TENANT
    return role_for_use(conn, tenant, create=False)


def _known(conn: Conn, tenant: str) -> str:
    """The hint of a tenant never made: the command that makes it, and the registered tenants (a
    typo's right name is among them)."""
    return f"create it: kbctl tenants create {tenant}; known tenants: {known(conn)}"


def known(conn: Conn) -> str:
    """The registered tenants' names, for a hint: the first ten by name (and how many there are)."""
    names = sorted(t["name"] for t in list_tenants(conn))
    return ", ".join(names[:10]) + (f" … ({len(names)})" if len(names) > 10 else "") or "none"


def deleted_at(conn: Conn, tenant: str) -> str | None:
    """When ``tenant`` was deleted (ISO 8601), if it was and was not made again since; the owner reads it."""
    row = conn.execute(query("tenants/deleted"), (tenant,)).fetchone()
    return row[0].isoformat() if row else None


def _made(conn: Conn, tenant: str, *, again: bool) -> str:
    """``create_tenant``'s and a first use's work, under the tenant's lock (so a first use racing a
    delete, or another first use, sees its end): ``again``, a deleted tenant is made again; else it
    is refused."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute(query("tenants/lock"), (tenant,))
            if again:
                conn.execute(query("tenants/forget_deleted"), (tenant,))
            elif conn.execute(query("tenants/deleted"), (tenant,)).fetchone() is not None:
                raise deleted(tenant)
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
    """Delete a tenant's namespaces and rows (as its role), unregister it, record that it was
    deleted (no later use of its name makes it again: ``role_for_use``) and drop its role: one
    transaction, under the tenant's lock, taken exclusively first. Whoever makes a namespace of the
    tenant or writes its documents holds that lock shared (``namespaces.ensure_namespace``,
    ``runs.write_lock``), as a first use of the name and a token being made hold it: each is wholly
    before the delete (and goes with it) or waits for it and is refused (``TenantNotFound``), so
    nothing of the tenant is left once the delete commits. The namespaces' HNSW indexes are dropped
    after the commit (``CONCURRENTLY``: other tenants' searches go on meanwhile).

    Returns what went (``namespaces``), or None when the tenant is not registered.
    """
    if tenant_role(conn, tenant) is None:
        return None
    with conn.transaction():
        conn.execute(query("tenants/lock"), (tenant,))
        role = tenant_role(conn, tenant)  # again under the lock: another delete may have been first
        if role is None:
            return None
        gens: list[int] = []
        with as_role(conn, role):
            names = [r[0] for r in conn.execute(query("namespaces/names_of_tenant"), (tenant,))]
            for name in names:
                gens += remove_namespace(conn, name, tenant)[1]
            conn.execute(query("tenants/delete_tenant_rows"), (tenant, tenant, tenant))
        conn.execute(query("tenants/unregister"), (tenant,))
        conn.execute(query("tenants/record_deleted"), (tenant,))  # it stays deleted (migration 020)
        conn.execute(template("tenants/drop_role", role=sql.Identifier(role)))
    drop_generation_indexes(conn, gens)
    return {"tenant": tenant, "role": role, "namespaces": len(names)}
