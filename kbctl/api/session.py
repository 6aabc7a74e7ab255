"""``Session``: a knowledge base's connections, acting as its tenant's role.

Each thread that uses the session has its own connections (``ThreadConnections``): a main one
(migrated on first use when ``database.auto_migrate``), side connections the search engine opens
per purpose (``side_connection("dense")``) and the owner's. An application shares one
``kbctl.open()`` among its threads: a psycopg connection runs one transaction at a time, so
threads sharing one broke each other's (``transaction commit at the wrong nesting level``).

Every verb runs inside ``call()`` (the library's boundary, ``kbctl.api._boundary``), which counts
it on its thread's set. That count is what keeps a set from being closed or lent under a verb:

- At most ``database.handle_threads`` sets exist. A thread without one takes over the set of a
  thread that has ended (the other ended ones are closed), else opens a new one under the limit,
  else takes over the set of a thread between calls, else waits for one (``database.connect_timeout``,
  then a ``DatabaseError`` naming the setting). A pool of 40 threads on one handle held up to 120
  connections: ``too many clients`` on the embedded server's 100, searches silently degraded.
- ``shut()`` (``kb.close()``) refuses new verbs at once (``KnowledgeBaseClosed``), waits for those
  under way, then cancels what still runs; ``close()`` never closes a set another thread's verb is
  using: it marks it, and that thread closes it when its verb ends (closing a connection under a
  running statement crashes libpq).

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
import time
from typing import Any, Iterator

from .. import validate
from ..config import Settings
from ..errors import DatabaseError, KnowledgeBaseClosed
from ..store import tenants
from ..store.db import Database, register_vector

__all__ = ["Session", "ThreadConnections", "BACKGROUND"]

# Side connections the search engine reads on in the background, for no one request: a segment's
# forward index (``kbctl.search.forward``), read once per process and kept.
BACKGROUND = ("forward",)

# After ``shut``'s wait, how long the statements of verbs still running are cancelled (each new one
# as it starts: a verb between statements meets the next), before ``shut`` returns without them.
CANCEL_SECONDS = 5.0

_CLOSED_HINT = "open another with kbctl.open(), and close() it after its last call (`with kbctl.open() as kb:` does)"


class ThreadConnections:
    """The connections one thread of a session uses (each opened on first use)."""

    def __init__(self, session: Session, thread: threading.Thread) -> None:
        self.session, self.thread = session, thread
        self.conn: Any = None  # the main connection, once open
        self.sides: dict[str, Any] = {}  # side connections by purpose
        self.owner: Any = None  # the login's connection (``Session.owner_connection``), once open
        self.plans = False  # inside ``Session.planning``
        self.calls = 0  # verbs of the session running on this thread now (``Session.call``; nested ones too)
        self.retired = False  # closed by ``Session.close`` under a verb: its thread closes it when the verb ends

    def side(self, purpose: str):
        """This thread's connection for one purpose of the search engine (opened on first use); the
        engine calls it from its worker threads, for the search of the thread that owns it."""
        c = self.sides.get(purpose)
        if c is None or c.closed:
            self.opening()
            c = self.sides[purpose] = self.session.tenant_connection()
        return c

    def opening(self) -> None:
        """Before a connection of this set is opened: none once ``shut`` gave up waiting for its verb."""
        if self.retired and self.session.closing:
            raise KnowledgeBaseClosed("this knowledge base was closed while the call ran", hint=_CLOSED_HINT)

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
        self.lock = threading.Lock()  # over ``threads`` and the sets' ``calls``
        self.freed = threading.Condition(self.lock)  # a verb ended: a set may be free, ``shut`` may go on
        self.pid = os.getpid()  # the process whose connections ``threads`` holds
        self.closing = False  # ``shut`` was called: no verb starts any more

    @property
    def tenant(self) -> str:
        return self.settings.tenant

    def mine(self, entering: bool = False) -> ThreadConnections:
        """The calling thread's connections. A thread without a set takes over one of a thread that
        has ended (the others are closed), else opens one while fewer than ``database.handle_threads``
        exist, else takes over one of a thread between calls, else waits for one
        (``database.connect_timeout``; 0: as long as it takes). In a process forked since, the
        inherited ones are dropped unclosed (they are the parent's: closing one would end the
        parent's server session). ``entering``: a verb starts on it (``call``)."""
        if os.getpid() != self.pid:
            self._forked()
        me = threading.current_thread()
        limit, wait = self.settings.database.handle_threads, self.settings.database.connect_timeout
        deadline = time.monotonic() + wait
        with self.lock:
            while True:
                found = self.threads.get(me.ident or 0)
                if found is not None and found.thread is me:
                    found.calls += entering
                    return found
                if self.closing:  # a thread without a set opens none once ``shut`` began
                    raise KnowledgeBaseClosed("this knowledge base is closed", hint=_CLOSED_HINT)
                ended = [t for t in self.threads.values() if not t.thread.is_alive() and t.calls == 0]
                for t in ended:
                    del self.threads[t.thread.ident or 0]
                if ended:
                    found = ended.pop()  # its connections serve this thread: no new ones
                elif len(self.threads) < limit:
                    found = ThreadConnections(self, me)
                else:
                    found = next((t for t in self.threads.values() if t.calls == 0 and not t.retired), None)
                    if found is not None:
                        del self.threads[found.thread.ident or 0]
                if found is not None:
                    found.thread = me
                    found.calls += entering  # counted under the lock: never lent between taking and using
                    self.threads[me.ident or 0] = found
                    break
                left = deadline - time.monotonic()
                if wait and left <= 0:
                    raise DatabaseError(
                        f"every connection of this knowledge base is in use: {limit} threads are inside a call "
                        f"(database.handle_threads = {limit}); waited {wait} s for one to end",
                        hint="raise [database] handle_threads (each thread holds up to three connections; the "
                        "embedded server allows 100 in all) or connect_timeout, or give the pool fewer threads",
                    )
                self.freed.wait(left if wait else None)
        for t in ended:
            t.close()
        return found

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """A verb of the session on the calling thread (the library's boundary wraps each one): refused
        once ``shut`` began; counted on the thread's set meanwhile, so the set is neither lent to
        another thread nor closed under it. A verb that fails while the session is shut fails with
        ``KnowledgeBaseClosed`` (its own error as the cause): the close cut it short. When the
        outermost verb ends, a set ``close`` marked is closed, by the thread that used it."""
        if self.closing and not self._inside():  # a verb under way may still call others: it is waited for
            raise KnowledgeBaseClosed("this knowledge base is closed", hint=_CLOSED_HINT)
        mine = self.mine(entering=True)
        try:
            yield
        except Exception as e:
            if self.closing and not isinstance(e, KnowledgeBaseClosed):
                raise KnowledgeBaseClosed("this knowledge base was closed while the call ran", hint=_CLOSED_HINT) from e
            raise
        finally:
            with self.lock:
                mine.calls -= 1
                done = mine.calls == 0 and mine.retired
                if done and self.threads.get(mine.thread.ident or 0) is mine:
                    del self.threads[mine.thread.ident or 0]
                self.freed.notify_all()
            if done:
                mine.close()

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
        self.freed = threading.Condition(self.lock)

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
            mine.opening()
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
            mine.opening()
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
        role up again). A set another thread's verb is using is not closed under it (closing a
        connection under a running statement crashes libpq): it is marked, and that thread closes it
        when the verb ends; the calling thread's own is closed now.

        A background read of the search engine on a side connection is stopped first
        (``kbctl.search.forward.stop_loads``): closing a connection another thread is reading from
        crashes libpq."""
        forward = sys.modules.get("kbctl.search.forward")  # not imported: no read was started
        if forward is not None:
            forward.stop_loads(self.side_connection)  # reads started with it (not with a thread's ``side``)
        if os.getpid() != self.pid:
            self._forked()
        me = threading.current_thread()
        with self.lock:
            sets = list(self.threads.values())
            busy = [t for t in sets if t.calls > 0 and t.thread is not me]
            mine = [t for t in sets if t.calls > 0 and t.thread is me]  # close() inside a verb of its own
            for t in busy + (mine if self.closing else []):
                t.retired = True
            self.threads = {k: t for k, t in self.threads.items() if t in busy or t in mine}
        for t in sets:
            if t not in busy:
                t.close()
        self.role = None

    def shut(self, timeout: float = 10.0) -> None:
        """Close for good (``kb.close()``): no verb starts any more (``KnowledgeBaseClosed``); those
        running in other threads are waited for, up to ``timeout`` seconds, then their statements are
        cancelled (for ``CANCEL_SECONDS`` at most: each verb ends with ``KnowledgeBaseClosed`` at its
        next statement), then every connection is closed, but those of a verb still running, which
        its thread closes when the verb ends. Called again, it only closes what is left."""
        me = threading.current_thread()
        with self.lock:
            self.closing = True
            self.freed.notify_all()  # threads waiting for a set: refused
        deadline = time.monotonic() + max(0.0, timeout)
        with self.lock:
            while self._busy(me) and time.monotonic() < deadline:
                self.freed.wait(deadline - time.monotonic())
        deadline = time.monotonic() + CANCEL_SECONDS
        while time.monotonic() < deadline:
            with self.lock:
                busy = self._busy(me)
            if not busy:
                break
            for t in busy:
                for c in t.open():
                    with contextlib.suppress(Exception):  # nothing running, or the server gone
                        c.cancel_safe(timeout=1.0)
            with self.lock:
                self.freed.wait(0.1)
        self.close()

    def _inside(self) -> bool:
        """Whether the calling thread is inside a verb of the session."""
        mine = self._current()
        return mine is not None and mine.calls > 0

    def _busy(self, me: threading.Thread) -> list[ThreadConnections]:  # under ``lock``
        return [t for t in self.threads.values() if t.calls > 0 and t.thread is not me and t.thread.is_alive()]
