"""The warm process behind ``kbctl serve`` and ``kbctl mcp``: knowledge bases opened once and reused.

Each request borrows a ``KnowledgeBase`` (its own database connections) from a pool of
``[server] workers`` per tenant; the query embedder is loaded once per process (``kbctl.embed``
caches it), before the first request. A request whose client went away is cancelled where it
stands: waiting for a connection, it never starts; running, its statements are cancelled.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import queue
import threading
import time
from typing import Any, Callable, Iterator

from ..api import KnowledgeBase, Session
from ..config import Settings
from ..errors import (
    DatabaseError,
    DatabaseUnavailable,
    KbctlError,
    ResourceExhausted,
    StatementTimeout,
    UsageError,
)
from ..ids import Ids

log = logging.getLogger(__name__)

__all__ = ["Service", "Cancel", "CANCEL", "BEARER", "Cancelled", "StaleToken"]


class Cancelled(KbctlError):
    """The client went away before its request finished."""


class StaleToken(KbctlError):
    """A remembered token is no longer valid: revoked since it was looked up, or its tenant is not
    the one it was made for (deleted and made again under its name since). Answered as a token
    unknown (401)."""

    def __init__(self) -> None:
        super().__init__("missing or invalid bearer token")


class Cancel:
    """A request's cancel handle: set by the HTTP layer when the client disconnects."""

    def __init__(self) -> None:
        self.cancelled = False
        self.kb: Any = None
        self._lock = threading.Lock()

    def attach(self, kb: Any) -> None:
        with self._lock:
            if self.cancelled and kb is not None:
                raise Cancelled("the client went away")
            self.kb = kb

    def cancel(self) -> None:
        """Stop the request: statements running on its connections are cancelled by the server."""
        with self._lock:
            self.cancelled = True
            kb = self.kb
        if kb is not None:
            kb.session.cancel(timeout=2)


CANCEL: contextvars.ContextVar[Cancel | None] = contextvars.ContextVar("kbctl_cancel", default=None)
# The bearer token of the request being served (set by the HTTP layer; worker threads and the MCP
# SDK's tasks inherit it): each borrow for a token's agent checks it is still valid (``Service.kb``).
BEARER: contextvars.ContextVar[str | None] = contextvars.ContextVar("kbctl_bearer", default=None)


class Service:
    """Pools of knowledge bases (one per tenant) over one set of settings."""

    def __init__(self, settings: Settings, open_kb: Callable[[Settings], Any] | None = None) -> None:
        self.settings, self.open_kb = settings, open_kb or KnowledgeBase
        self.server = settings.server
        self.workers = self.server.workers
        self._pools: dict[str, queue.LifoQueue] = {}
        self._made: dict[str, int] = {}
        self._lock = threading.Lock()
        self._ids: dict[str, Ids] = {}
        self._refused: set[str] = set()  # tokens a borrow refused, for the gate to forget (``refused``)
        self.model_load_seconds: dict[str, float] = {}

    def settings_for(self, tenant: str | None) -> Settings:
        if not tenant or tenant == self.settings.tenant:
            return self.settings
        return self.settings.with_overrides({"defaults.tenant": tenant})

    @contextlib.contextmanager
    def kb(self, tenant: str | None = None, made_for: Ids | None = None) -> Iterator[Any]:
        """Borrow a knowledge base of ``tenant`` (the server's by default) for one request. With
        ``made_for`` (a token's agent: the ids of the tenant its token was looked up under,
        ``agent_of_token``), the borrow reads the request's token (``BEARER``) with the key, in the
        same statement, and refuses it (``StaleToken``) unless the token is valid now and the key is
        that one: a token revoked since its lookup is refused on its next request, and a tenant
        deleted and made again under its name (a new key) is never reached by a token of the tenant
        before. A refused token is noted for the gate to forget (``refused``)."""
        tenant = tenant or self.settings.tenant
        token = BEARER.get() if made_for is not None else None
        if made_for is not None and token is None:
            raise StaleToken()  # a token's agent outside its request: no token to check, none honoured
        with self._borrowed(tenant) as kb:
            ids, valid = self._check_key(tenant, kb, token)
            if made_for is not None and (ids != made_for or not valid):
                if token is not None:
                    self._note_refused(token)
                raise StaleToken()
            yield kb

    def _note_refused(self, token: str) -> None:
        with self._lock:
            if len(self._refused) > 10000:
                self._refused.clear()  # the gate looks every token up again at least every _TOKEN_TTL
            self._refused.add(token)

    def refused(self, token: str) -> bool:
        """Whether a borrow refused ``token`` (revoked, or of a tenant made again) since this was last
        asked: the gate then forgets its lookup and looks it up again, so a route that borrows
        nothing (``/metrics``, MCP's lists) refuses it too. Says so once."""
        with self._lock:
            if token in self._refused:
                self._refused.discard(token)
                return True
            return False

    def agent_of_token(self, token: str) -> tuple[str, str, Ids] | None:
        """(tenant, agent, the tenant's ids) of a valid bearer token of any tenant, else None: looked
        up as the login (``kb.holder_of_token``) on a knowledge base of the server's tenant,
        borrowed without reading that tenant's key. So a server whose own tenant was deleted still
        finds the other tenants' agents (their requests are served), and a deleted tenant's tokens,
        which went with it, find none. The ids say which tenant of the name the token was made for
        (``kb``'s ``made_for``)."""
        with self._borrowed(self.settings.tenant) as kb:
            return kb.holder_of_token(token)

    def known_ids(self, tenant: str) -> Ids | None:
        """The ids of ``tenant`` as the last borrow read them, without a borrow; None before any."""
        with self._lock:
            return self._ids.get(tenant)

    @contextlib.contextmanager
    def _borrowed(self, tenant: str) -> Iterator[Any]:
        pool = self._pool(tenant)
        try:
            kb = pool.get_nowait()
        except queue.Empty:
            kb = self._make(tenant) or pool.get()
        cancel = CANCEL.get()
        if isinstance(getattr(kb, "session", None), Session):
            kb.session.hand_over()  # its connections serve this request's thread: one set per pooled kb
        try:
            if cancel is not None:
                cancel.attach(kb)
            yield kb
        finally:
            if cancel is not None:
                cancel.attach(None)
            pool.put(kb)

    def ids(self, tenant: str | None = None) -> Ids:
        """The opaque ids of ``tenant`` (the server's by default) that agents see (``kbctl.ids``),
        under its key in the database, so every server on it agrees: the key read by the last
        knowledge base borrowed (``_check_key``: each borrow reads it), so a request holding one
        seals with the key its borrow read. Before any borrow of ``tenant``, it borrows one."""
        tenant = tenant or self.settings.tenant
        with self._lock:
            found = self._ids.get(tenant)
        if found is None:
            with self.kb(tenant):
                pass  # the borrow read the key
            with self._lock:
                found = self._ids[tenant]
        return found

    def _check_key(self, tenant: str, kb: Any, token: str | None = None) -> tuple[Ids, bool]:
        """Read ``tenant``'s id key on ``kb``'s connection (one lookup of its row, as its role) and
        keep it for ``ids``; with ``token``, whether it is a valid token of ``tenant`` now, read in
        the same statement (``kb.ids_with_token``), else True. A tenant deleted and made again under its name (``kbctl tenants
        delete``) has a new role and a new key: a pooled knowledge base still acting as the dropped
        role cannot read the row, and is connected again (its role looked up anew) first, so a
        running server serves the tenant that exists now and seals with its key from the first
        request on, as a restarted one would."""

        def read() -> tuple[Ids, bool]:
            return (kb.ids(), True) if token is None else kb.ids_with_token(token)

        try:
            ids, valid = read()
        except (UsageError, DatabaseError) as e:  # the dropped role's connection: refused, or no row of its own
            if isinstance(e, (DatabaseUnavailable, StatementTimeout, ResourceExhausted)):
                raise  # the database's state, not the role's: connecting again would not help
            kb.session.close()
            ids, valid = read()
        with self._lock:
            if self._ids.get(tenant) != ids:
                if tenant in self._ids:
                    log.info(
                        "tenant %s has a new id key (deleted and made again): ids sealed before do not open", tenant
                    )
                self._ids[tenant] = ids
        return ids, valid

    def _pool(self, tenant: str) -> queue.LifoQueue:
        with self._lock:
            return self._pools.setdefault(tenant, queue.LifoQueue())

    def _make(self, tenant: str) -> Any:
        with self._lock:
            if self._made.get(tenant, 0) >= self.workers:
                return None
            self._made[tenant] = self._made.get(tenant, 0) + 1
        return self.open_kb(self.settings_for(tenant))

    def warm(self) -> None:
        """Connect once and load the default profile's query embedder (timed for /metrics)."""
        from ..embed import get_embedder

        with self.kb() as kb:
            kb.namespaces()
            prof = kb.settings.profile()
        t0 = time.perf_counter()
        get_embedder(prof, purpose="query").embed_query("warm up")
        self.model_load_seconds[prof.name] = time.perf_counter() - t0
        log.info("profile %s query embedder ready in %.2f s", prof.name, self.model_load_seconds[prof.name])

    def close(self) -> None:
        for pool in self._pools.values():
            while not pool.empty():
                pool.get_nowait().close()
