"""``kb.tenants``: tenants and their roles (row-level security: a role per tenant). Calling it
lists them: ``kb.tenants()``. Needs a login that may create roles (the tables' owner with
CREATEROLE, or a superuser)."""

from __future__ import annotations

from .. import validate
from ..store import tenants
from ._boundary import Part, psycopg_boundary

__all__ = ["Tenants"]


@psycopg_boundary
class Tenants(Part):
    """The registered tenants (``kbctl tenants``), on the owner's connection."""

    def __call__(self) -> list[dict]:
        """The registered tenants with their roles (every one, to the tables' owner)."""
        with self.session.admin() as conn:
            return tenants.list_tenants(conn)

    def create(self, name: str | None = None) -> dict:
        """Register tenant ``name`` (default: this one) and create its NOLOGIN role; idempotent."""
        tenant = validate.name("tenant", name or self.tenant)
        with self.session.admin() as conn:
            return {"tenant": tenant, "role": tenants.create_tenant(conn, tenant)}

    def delete(self, name: str) -> dict | None:
        """Delete a tenant's namespaces (with everything in them), its audit, tokens and query log,
        then its role; what went, or None when no such tenant is registered."""
        with self.session.admin() as conn:
            gone = tenants.delete_tenant(conn, validate.name("tenant", name))
        if name == self.tenant:
            self.session.close()  # its role is gone: the next call looks it up (or creates it) again
        return gone
