"""``Session``: a knowledge base's connections, acting as its tenant's role.

One main connection (migrated on first use when ``database.auto_migrate``), side connections the
search engine opens per purpose (``side_connection("dense")``), new tenant connections for the
ingest lookup, and short-lived admin connections as the role kbctl logs in as (the tables' owner).
Public, so an adapter (``kbctl.server``) cancels a request's statements through ``cancel()`` and
never reads a private.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

from .. import validate
from ..config import Settings
from ..store import tenants
from ..store.db import Database, register_vector

__all__ = ["Session", "BACKGROUND"]

# Side connections the search engine reads on in the background, for no one request: a segment's
# forward index (``kbctl.search.forward``), read once per process and kept.
BACKGROUND = ("forward",)


class Session:
    """The connections of one tenant over one set of settings; each opened on first use."""

    def __init__(self, settings: Settings) -> None:
        validate.name("tenant", settings.tenant)  # every namespace name is scoped by it
        self.settings = settings
        self.db = Database(settings)
        self.conn: Any = None  # the main connection, once open
        self.sides: dict[str, Any] = {}  # side connections by purpose
        self.role: str | None = None  # this tenant's role, once looked up
        self.owner: Any = None  # the login's connection (``owner_connection``), once open
        self.writes = False  # a verb that writes was called (``writing``): embedded, it makes the tenant
        self.plans = False  # inside ``planning``: nothing is made, a tenant not made yet is read as none

    @property
    def tenant(self) -> str:
        return self.settings.tenant

    def connection(self):
        """The open connection (migrations applied when ``database.auto_migrate``)."""
        if self.conn is None or self.conn.closed:
            conn = self.db.connect(register=False)
            try:
                if self.settings.database.auto_migrate:
                    self.db.migrate(conn)  # on the same connection: a cold command opens one, not two
                register_vector(conn)  # after migrating: the vector type exists from migration 001 on
                self.enter_tenant(conn)
            except BaseException:
                conn.close()
                raise
            self.conn = conn
        return self.conn

    def side_connection(self, purpose: str):
        """Another connection for one purpose of the search engine (opened on first use)."""
        c = self.sides.get(purpose)
        if c is None or c.closed:
            c = self.sides[purpose] = self.tenant_connection()
        return c

    def writing(self) -> None:
        """Said by a verb that writes the tenant's data (ingest, ``kbctl store``,
        ``namespaces create``, eval import, reembed) before it connects: embedded, a tenant never
        made is made on this first use. A read (search, stats, runs, verify, a server's request…)
        never makes one: a name not registered (a typo: ``--tenant acmee``) is a ``TenantNotFound``."""
        self.writes = True

    @contextlib.contextmanager
    def planning(self) -> Iterator[None]:
        """A plan inside the block (``kbctl ingest --plan``; what the ``chunk`` and ``embed`` stages
        read, ``kbctl.api.records``): it writes nothing, so it makes no tenant, even where the run
        would (embedded). A tenant not made yet is read as no tenant's role
        (``kbctl.store.tenants.role_to_plan``: it sees no rows, as the tenant once made holds none;
        ``unmade`` says so); a read's refusals hold otherwise (a deleted tenant, one never made by
        DSN). The connections opened acting as no tenant are closed at the block's end: the
        session's next verb looks the tenant's role up again (and a run makes it)."""
        self.plans = True
        try:
            yield
        finally:
            self.plans = False
            if self.unmade:
                self.close()

    @property
    def unmade(self) -> bool:
        """Whether a plan reads this tenant as not made yet (``planning``)."""
        return self.role == tenants.NO_TENANT

    def tenant_connection(self):
        """A new connection acting as this tenant's role (the ingest lookup's, the search engine's sides)."""
        conn = self.db.connect()
        try:
            self.enter_tenant(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def enter_tenant(self, conn) -> None:
        """``SET ROLE`` to the tenant's role: row-level security then holds every statement to its rows.

        Embedded, a tenant's role is created on its name's first use by a verb that writes
        (``writing``); with a DSN, and for a read, it must exist (``kbctl tenants create``). A deleted tenant is never made again here, embedded or not: a
        ``TenantNotFound`` until ``kbctl tenants create`` (``kbctl.store.tenants.role_for_use``).
        """
        if self.role is None and self.plans:
            self.role = tenants.role_to_plan(conn, self.tenant, create=self.db.embedded)
        elif self.role is None:
            self.role = tenants.role_for_use(conn, self.tenant, create=self.writes and self.db.embedded)
        tenants.enter(conn, self.role)

    def admin_connection(self):
        """A connection acting as the role kbctl logs in as (the tables' owner), migrated when
        ``database.auto_migrate``: for ``kbctl tenants`` and other administration."""
        conn = self.db.connect(register=False)
        try:
            if self.settings.database.auto_migrate:
                self.db.migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def owner_connection(self):
        """A kept connection acting as the login (the tables' owner), opened on first use like
        ``admin_connection``: for the one lookup that must not hang on this tenant's role, a bearer
        token's (``kbctl.agent_of_token``, the definer's lookup across tenants). A server looks every
        token up on its own tenant's knowledge base; on the tenant's connection, a deleted tenant
        failed every lookup, other tenants' tokens too. Nothing else runs on it."""
        if self.owner is None or self.owner.closed:
            self.owner = self.admin_connection()
        return self.owner

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        """``admin_connection()``, closed when the block ends."""
        conn = self.admin_connection()
        try:
            yield conn
        finally:
            conn.close()

    def open_connections(self) -> list[Any]:
        """The main, side and owner connections open now."""
        return [c for c in (self.conn, *self.sides.values(), self.owner) if c is not None and not c.closed]

    def cancel(self, timeout: float = 2.0) -> None:
        """Cancel the statements running on this session's connections (a request whose client went
        away), but not those of a background purpose (``BACKGROUND``): they serve no one request."""
        for conn in self.open_connections():
            if any(conn is self.sides.get(p) for p in BACKGROUND):
                continue
            with contextlib.suppress(Exception):
                conn.cancel_safe(timeout=timeout)

    def close(self) -> None:
        """Close every connection; the next call opens new ones (and looks the tenant's role up again).

        A background read of the search engine on a side connection is stopped first
        (``kbctl.search.forward.stop_loads``): closing a connection another thread is reading from
        crashes libpq."""
        forward = sys.modules.get("kbctl.search.forward")  # not imported: no read was started
        if forward is not None:
            forward.stop_loads(self.side_connection)
        for c in self.open_connections():
            c.close()
        self.conn = None
        self.sides = {}
        self.owner = None
        self.role = None
