"""The audit log of searches made as a principal (``[audit]``; migration 007).

A row says who searched (user and groups), when, which namespaces, a sha256 of the query (never
its text), the strategy, and how many hits were returned and withheld. Rows past ``retention_days``
are deleted when the log is first written by a process, and by ``KnowledgeBase.prune_audit``.
"""

from __future__ import annotations

from typing import Sequence

from ..types import Principal, SearchResult, content_hash
from .connection import Conn, columns
from .namespaces import Namespace
from .queries import query

__all__ = ["record_search", "prune", "list_audit"]

_PRUNED: set[tuple[int, int]] = set()  # (connection, retention) pruned once by this process


def record_search(
    conn: Conn,
    tenant: str,
    namespaces: Sequence[Namespace],
    principal: Principal,
    text: str,
    result: SearchResult,
    retention_days: int,
) -> None:
    """Append one audited search (and prune old rows the first time this connection writes)."""
    with conn.transaction():
        conn.execute(
            query("audit/record"),
            (
                tenant,
                [n.id for n in namespaces],
                f"user:{principal.user}" if principal.user else "anonymous",
                list(principal.groups),
                content_hash(text),
                result.strategy,
                len(result.hits),
                result.withheld,
            ),
        )
        if (id(conn), retention_days) not in _PRUNED:
            _PRUNED.add((id(conn), retention_days))
            conn.execute(query("audit/prune"), (retention_days,))


def prune(conn: Conn, retention_days: int) -> int:
    """Delete rows older than ``retention_days``; how many went."""
    with conn.transaction():
        return conn.execute(query("audit/prune"), (retention_days,)).rowcount


def list_audit(conn: Conn, tenant: str, limit: int = 100) -> list[dict]:
    """The tenant's latest audited searches, newest first."""
    cur = conn.execute(query("audit/list"), (tenant, limit))
    cols = columns(cur)
    return [dict(zip(cols, r)) for r in cur.fetchall()]
