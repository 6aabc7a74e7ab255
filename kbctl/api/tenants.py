"""``kb.tenants``: tenants and their roles (row-level security: a role per tenant). Calling it
lists them: ``kb.tenants()``. Needs a login that may create roles (the tables' owner with
CREATEROLE, or a superuser)."""

from __future__ import annotations

import hmac

from .. import validate
from ..errors import TenantNotFound, UsageError, echo
from ..ids import KINDS, Ids
from ..store import agents, tenants
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
        tenant = validate.name("tenant", self.tenant if name is None else name)  # "" is refused, not "not given"
        with self.session.admin() as conn:
            return {"tenant": tenant, "role": tenants.create_tenant(conn, tenant)}

    def get(self, name: str) -> dict:
        """Registered tenant ``name`` (name, role, created_at); a ``TenantNotFound`` naming the
        known tenants when there is none (never made, or deleted)."""
        with self.session.admin() as conn:
            found = [t for t in tenants.list_tenants(conn) if t["name"] == validate.name("tenant", name)]
            if not found:
                raise TenantNotFound(
                    f"tenant {name!r} does not exist", hint=f"known tenants: {tenants.known(conn)} (kbctl tenants)"
                )
        return found[0]

    def delete(self, name: str) -> dict | None:
        """Delete a tenant's namespaces (with everything in them), its audit, tokens and query log,
        then its role; what went, or None when no such tenant is registered."""
        with self.session.admin() as conn:
            gone = tenants.delete_tenant(conn, validate.name("tenant", name))
        if name == self.tenant:
            self.session.close()  # its role is gone: the next call looks it up again, and is refused
        return gone

    def ids(self) -> Ids:
        """This tenant's opaque ids (``kbctl.ids``): what the server seals the ids it gives agents
        with and opens what they send back with. Its key is read as the tenant's own role (its own
        row of the registry); the ``Ids`` never shows it."""
        return self._ids_of(tenants.tenant_id_key(self._conn(), self.tenant))

    def ids_with_token(self, token: str) -> tuple[Ids, bool]:
        """``ids`` and whether ``token`` is a valid bearer token of this tenant now (not revoked),
        read in the one statement that reads the key, as the tenant's own role (its own row and
        tokens): a server checks a remembered token at every borrow of its requests at no extra
        round trip (``kbctl.server.service``), so a revoke holds from the next request on."""
        found = agents.id_key_with_token(self._conn(), self.tenant, token)
        return self._ids_of(None if found is None else found[0]), found is not None and found[1]

    def _ids_of(self, key: bytes | None) -> Ids:
        if key is None:  # the session entered the tenant's role, so its row exists: not reached
            raise UsageError(f"tenant {self.tenant!r} is not registered")
        last = getattr(self, "_last_ids", None)  # a server reads the key at every borrow: built once a key
        if last is None or not hmac.compare_digest(last[0], key):
            last = self._last_ids = (key, Ids(key))
        return last[1]

    def open_id(self, token: str, name: str | None = None) -> dict:
        """The kind and raw id of an opaque id an agent of tenant ``name`` (default: this one) was
        given, for an operator to find its row; a ``UsageError`` for a string that is not one."""
        tenant = validate.name("tenant", self.tenant if name is None else name)
        with self.session.admin() as conn:
            key = tenants.tenant_id_key(conn, tenant)
        if key is None:
            raise UsageError(f"no tenant {tenant!r} is registered", hint="kbctl tenants lists them")
        found = Ids(key).which(token.strip())
        if found is None:
            raise UsageError(
                f"{echo(token)} is not an id tenant {tenant!r} gave out",
                hint="an id opens only under the tenant whose server gave it (--tenant), as the agent sent it",
            )
        return {"tenant": tenant, "kind": KINDS[found[0]], "id": found[1]}
