"""What the server offers, probed once per connection pool (``Database``), and how the store adapts.

A DSN may name any PostgreSQL with pgvector: an older pgvector without ``halfvec`` (0.7) or the
iterative HNSW scan (``hnsw.iterative_scan``, ``hnsw.max_scan_tuples``: 0.8), or a login that may
not create roles (kbctl makes a NOLOGIN role per tenant, migration 009). Rather than fail in the
middle of a query, the store probes once (``probe``), logs one line per lack (``Capabilities.notes``)
and adapts: a ``SET LOCAL hnsw.*`` the server does not define is left out (``accepts``); creating
a tenant without the privilege is refused in one line naming it (``kbctl.store.tenants``).
"""

from __future__ import annotations

import logging
import re
import weakref
from dataclasses import dataclass

from .connection import Conn, one
from .queries import query

__all__ = ["Capabilities", "probe", "of", "remember", "accepts"]

log = logging.getLogger(__name__)

#: The hnsw.* settings the store sends (SET LOCAL, kbctl.store.search and .checks).
USED_HNSW = ("hnsw.ef_search", "hnsw.iterative_scan", "hnsw.max_scan_tuples")

_BY_CONN: weakref.WeakKeyDictionary[Conn, Capabilities] = weakref.WeakKeyDictionary()
_SET_LOCAL = re.compile(r"^\s*SET\s+LOCAL\s+([a-z_]+\.[a-z_]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Capabilities:
    """The server's answers: versions, ``halfvec``, the ``hnsw.*`` settings, the login's role rights."""

    server_version: int
    pgvector: str | None
    halfvec: bool
    hnsw_settings: frozenset[str]
    may_create_roles: bool
    login: str

    @property
    def notes(self) -> list[str]:
        """One line per thing kbctl would use and this server lacks, with how kbctl adapts."""
        out = []
        if not self.may_create_roles:
            out.append(
                f"the login {self.login} may not create roles: kbctl uses only tenants that already exist"
                f" (a new tenant, and migration 009, need ALTER ROLE {self.login} CREATEROLE)"
            )
        if self.pgvector is not None and not self.halfvec:
            out.append(f'pgvector {self.pgvector} has no halfvec (0.7+): only storage = "vector" works here')
        missing = [s for s in USED_HNSW if s not in self.hnsw_settings]
        if self.pgvector is not None and missing:
            out.append(
                f"pgvector {self.pgvector} does not define {', '.join(missing)}: HNSW searches run without"
                " (a filtered one may return fewer than k; upgrade to pgvector 0.8+)"
            )
        return out


def probe(conn: Conn) -> Capabilities:
    """Ask the server (two or three small statements)."""
    version, pgvector, halfvec, may_create, login = one(conn.execute(query("probe/server")))
    settings: frozenset[str] = frozenset()
    if pgvector is not None:
        with conn.transaction():
            conn.execute(query("probe/load_vector"))
            settings = frozenset(r[0] for r in conn.execute(query("probe/hnsw_settings")))
    return Capabilities(int(version), pgvector, bool(halfvec), settings, bool(may_create), str(login))


def remember(conn: Conn, caps: Capabilities) -> None:
    """Record what ``conn``'s server offers (the pool's probe), for ``of``."""
    _BY_CONN[conn] = caps


def of(conn: Conn) -> Capabilities:
    """What ``conn``'s server offers: its pool's probe, or a probe now (a connection opened elsewhere)."""
    caps = _BY_CONN.get(conn)
    if caps is None:
        caps = _BY_CONN[conn] = probe(conn)
    return caps


def accepts(conn: Conn, statement: str) -> bool:
    """Whether the server defines the extension setting a ``SET LOCAL ext.name`` statement sets
    (core settings, and statements of any other kind, always pass)."""
    m = _SET_LOCAL.match(statement)
    if m is None or not m.group(1).lower().startswith("hnsw."):
        return True
    return m.group(1).lower() in of(conn).hnsw_settings
