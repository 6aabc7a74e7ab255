"""``Session``: a knowledge base's connections, acting as its tenant's role.

Each thread that uses the session has its own connections (``ThreadConnections``): a main one
(migrated on first use when ``database.auto_migrate``), side connections the search engine opens
per purpose (``side_connection("dense")``) and the owner's. An application shares one
``kbctl.open()`` among its threads: a psycopg connection runs one transaction at a time, so
threads sharing one broke each other's (``transaction commit at the wrong nesting level``). The
connections of a thread that has ended are closed when a new thread first uses the session, so a
thread per request does not leave its connections behind; ``close()`` closes every thread's.
A process forked after the session connected opens its own: the parent's stay the parent's.
New tenant connections serve the ingest lookup, and short-lived admin connections act as the role
kbctl logs in as (the tables' owner). Public, so an adapter (``kbctl.server``) cancels a request's
statements through ``cancel()`` and never reads a private.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Iterator

from .. import validate
from ..config import Settings
from ..store import tenants
from ..store.db import Database, register_vector

__all__ = ["Session", "ThreadConnections", "BACKGROUND"]

# Side connections the search engine reads on in the background, for no one request: a segment's
# forward index (``kbctl.search.forward``), read once per process and kept.
BACKGROUND = ("forward",)


class ThreadConnections:
    """The connections one thread of a session uses (each opened on first use)."""

    def __init__(self, session: Session, thread: threading.Thread) -> None:
        self.session, self.thread = session, thread
        self.conn: Any = None  # the main connection, once open
        self.sides: dict[str, Any] = {}  # side connections by purpose
        self.owner: Any = None  # the login's connection (``Session.owner_connection``), once open
        self.plans = False  # inside ``Session.planning``

    def side(self, purpose: str):
        """This thread's connection for one purpose of the search engine (opened on first use); the
        engine calls it from its worker threads, for the search of the thread that owns it."""
        c = self.sides.get(purpose)
        if c is None or c.closed:
            c = self.sides[purpose] = self.session.tenant_connection()
        return c

    def open(self) -> list[Any]:
        return [c for c in (self.conn, *self.sides.values(), self.owner) if c is not None and not c.closed]

    def close(self) -> None:
        """Close them, the background reads on its side connections stopped first
        (``kbctl.search.forward.stop_loads``): closing a connection another thread is reading from
        crashes libpq."""
        forward = sys.modules.get("kbctl.search.forward")  # not imported: no read was started
        if forward is not None:
            forward.stop_loads(self.side)
        for c in self.open():
            c.close()
        self.conn, self.sides, self.owner = None, {}, None


class Session:
    """The connections of one tenant over one set of settings; each opened on first use."""

    def __init__(self, settings: Settings) -> None:
        validate.name("tenant", settings.tenant)  # every namespace name is scoped by it
        self.settings = settings
        self.db = Database(settings)
        self.role: str | None = None  # this tenant's role, once looked up
        self.writes = False  # a verb that writes was called (``writing``): embedded, it makes the tenant
        self.threads: dict[int, ThreadConnections] = {}  # each thread's connections, by thread id
        self.lock = threading.Lock()  # over ``threads``
        self.pid = os.getpid()  # the process whose connections ``threads`` holds

    @property
    def tenant(self) -> str:
        return self.settings.tenant

    def mine(self) -> ThreadConnections:
        """The calling thread's connections. A new thread's first use closes those of the threads
        that have ended; in a process forked since, the inherited ones are dropped unclosed (they
        are the parent's: closing one would end the parent's server session)."""
        if os.getpid() != self.pid:
            self._forked()
        me = threading.current_thread()
        with self.lock:
            found = self.threads.get(me.ident or 0)
            if found is not None and found.thread is me:
                return found
            ended = [t for t in self.threads.values() if not t.thread.is_alive()]
            for t in ended:
                del self.threads[t.thread.ident or 0]
            found = self.threads[me.ident or 0] = ThreadConnections(self, me)
        for t in ended:
            t.close()
        return found

    def hand_over(self) -> None:
        """For a pool that lends the session to one borrower at a time, on whichever of its threads
        (``kbctl serve``): the calling thread takes over the connections the session has, rather
        than opening its own beside those of the threads that borrowed it before (one set a thread
        of the pool, each held open). Never while another thread runs a verb of the session."""
        me = threading.current_thread()
        if os.getpid() != self.pid:
            self._forked()
        with self.lock:
            sets = list(self.threads.values())
            if not sets:
                return
            keep = next((t for t in sets if t.thread is me), sets[0])
            keep.thread = me
            self.threads = {me.ident or 0: keep}
        for t in sets:
            if t is not keep:
                t.close()

    def _forked(self) -> None:
        """In a process forked since: forget the parent's connections, unclosed (psycopg never
        finishes a connection another process opened), and its lock (a parent's thread may have held
        it at the fork)."""
        self.threads, self.lock, self.pid = {}, threading.Lock(), os.getpid()

    def _current(self) -> ThreadConnections | None:
        found = self.threads.get(threading.get_ident()) if os.getpid() == self.pid else None
        return found if found is not None and found.thread is threading.current_thread() else None

    @property
    def conn(self) -> Any:
        """The calling thread's main connection, if open."""
        mine = self._current()
        return None if mine is None else mine.conn

    @property
    def sides(self) -> dict[str, Any]:
        """The calling thread's side connections, by purpose."""
        mine = self._current()
        return {} if mine is None else mine.sides

    @property
    def plans(self) -> bool:
        """Whether the calling thread is inside ``planning``."""
        mine = self._current()
        return mine is not None and mine.plans

    def connection(self):
        """The calling thread's open connection (migrations applied when ``database.auto_migrate``)."""
        mine = self.mine()
        if mine.conn is None or mine.conn.closed:
            conn = self.db.connect(register=False)
            try:
                if self.settings.database.auto_migrate:
                    self.db.migrate(conn)  # on the same connection: a cold command opens one, not two
                register_vector(conn)  # after migrating: the vector type exists from migration 001 on
                self.enter_tenant(conn)
            except BaseException:
                conn.close()
                raise
            mine.conn = conn
        return mine.conn

    def side_connection(self, purpose: str):
        """The calling thread's connection for one purpose of the search engine (opened on first use)."""
        return self.mine().side(purpose)

    def sides_of_caller(self):
        """``side_connection`` bound to the calling thread's connections, for a search to hand its
        worker threads: each opens (or reuses) a connection of the thread whose search it serves."""
        return self.mine().side

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
        mine = self.mine()
        mine.plans = True
        try:
            yield
        finally:
            mine.plans = False
            if self.unmade:
                mine.close()
                self.role = None

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
        mine = self.mine()
        if mine.owner is None or mine.owner.closed:
            mine.owner = self.admin_connection()
        return mine.owner

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        """``admin_connection()``, closed when the block ends."""
        conn = self.admin_connection()
        try:
            yield conn
        finally:
            conn.close()

    def _all(self) -> list[ThreadConnections]:
        if os.getpid() != self.pid:
            return []  # a forked process's inheritance is the parent's
        with self.lock:
            return list(self.threads.values())

    def open_connections(self) -> list[Any]:
        """The main, side and owner connections of every thread open now."""
        return [c for t in self._all() for c in t.open()]

    def cancel(self, timeout: float = 2.0) -> None:
        """Cancel the statements running on this session's connections (a request whose client went
        away), but not those of a background purpose (``BACKGROUND``): they serve no one request."""
        for t in self._all():
            background = [t.sides.get(p) for p in BACKGROUND]
            for conn in t.open():
                if any(conn is b for b in background):
                    continue
                with contextlib.suppress(Exception):
                    conn.cancel_safe(timeout=timeout)

    def close(self) -> None:
        """Close every thread's connections; the next call opens new ones (and looks the tenant's
        role up again). Call it when no verb of the session is running in another thread.

        A background read of the search engine on a side connection is stopped first
        (``kbctl.search.forward.stop_loads``): closing a connection another thread is reading from
        crashes libpq."""
        forward = sys.modules.get("kbctl.search.forward")  # not imported: no read was started
        if forward is not None:
            forward.stop_loads(self.side_connection)  # reads started with it (not with a thread's ``side``)
        if os.getpid() != self.pid:
            self._forked()
        with self.lock:
            threads, self.threads = list(self.threads.values()), {}
        for t in threads:
            t.close()
        self.role = None
