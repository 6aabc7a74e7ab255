"""Agents' bearer tokens, the opt-in query log and the judgments attached to it (migration 008).

A token is kept as its sha256: it is random (32 bytes), so a fast hash is enough, and a stolen
table reveals no token. The query log keeps each logged query's text and the documents it
returned, so ``record_feedback`` can refuse a judgment of a document the query never returned.
"""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

from .connection import Conn, scalar
from .queries import query
from .roles import check_registered

__all__ = [
    "token_hash",
    "create_token",
    "agent_of_token",
    "id_key_with_token",
    "revoke_tokens",
    "live_tokens",
    "log_query",
    "logged_query",
    "record_feedback",
    "judged_queries",
]


def token_hash(token: str) -> str:
    """The stored form of a bearer token."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(conn: Conn, tenant: str, agent: str, token: str) -> int:
    """Store a new token of ``agent`` (hashed); its row id. Under the tenant's lock, as the tenant's
    delete removes its tokens (``tenants.delete_tenant``): a token is made before a delete, and goes
    with it, or after, and is refused (``TenantNotFound``); never in between, to outlive the delete
    and open a tenant made again under the name."""
    with conn.transaction():
        conn.execute(query("tenants/lock"), (tenant,))
        check_registered(conn, tenant)  # its own row, to its role
        return scalar(conn.execute(query("agents/create_token"), (tenant, agent, token_hash(token), tenant)))


def agent_of_token(conn: Conn, token: str) -> tuple[str, str, bytes] | None:
    """(tenant, agent, the tenant's id key) of a valid token of a registered tenant, else None. The
    key says which tenant of the name the token was made for: one deleted and made again has a new
    one. Read as the login (``kbctl.tenants`` shows a tenant's role its own row only)."""
    row = conn.execute(query("agents/agent_of_token"), (token_hash(token),)).fetchone()
    return (row[0], row[1], bytes(row[2])) if row else None


def id_key_with_token(conn: Conn, tenant: str, token: str) -> tuple[bytes, bool] | None:
    """(``tenant``'s id key, whether ``token`` is a valid token of it now) in one statement, else None
    for a tenant not registered. On the tenant's connection: its role reads its own row and tokens."""
    row = conn.execute(query("agents/id_key_with_token"), (token_hash(token), tenant)).fetchone()
    return (bytes(row[0]), bool(row[1])) if row else None


def revoke_tokens(conn: Conn, tenant: str, agent: str) -> int:
    """Revoke every token of ``agent``; how many."""
    with conn.transaction():
        return conn.execute(query("agents/revoke"), (tenant, agent)).rowcount


def live_tokens(conn: Conn, tenants: Sequence[str]) -> dict[tuple[str, str], int]:
    """(tenant, agent) -> how many valid tokens it holds, for ``tenants``; read as the login."""
    cur = conn.execute(query("agents/live_tokens"), (list(tenants),))
    return {(t, a): int(n) for t, a, n in cur}


def log_query(
    conn: Conn, tenant: str, agent: str, tool: str, ns_ids: Sequence[int], text: str, results: Sequence[tuple[int, int]]
) -> int:
    """Log one query and the (namespace id, document id) pairs it returned; its id."""
    with conn.transaction():
        return scalar(
            conn.execute(
                query("querylog/record"),
                (tenant, agent, tool, list(ns_ids), text, json.dumps([list(r) for r in results])),
            )
        )


def logged_query(conn: Conn, query_id: int, tenant: str, agent: str) -> tuple[list[int], set[tuple[int, int]]] | None:
    """(namespace ids, returned (namespace id, document id) pairs) of a query ``agent`` logged, else None."""
    row = conn.execute(query("querylog/get"), (query_id, tenant, agent)).fetchone()
    return None if row is None else (list(row[1]), {(int(a), int(b)) for a, b in row[2]})


def record_feedback(conn: Conn, query_id: int, ns_id: int, doc_id: int, useful: bool) -> None:
    """Attach (or replace) a judgment of one returned document."""
    with conn.transaction():
        conn.execute(query("querylog/record_feedback"), (query_id, ns_id, doc_id, useful))


def judged_queries(conn: Conn, ns_id: int) -> list[tuple[int, str, str, bool]]:
    """(query id, query text, document URI, useful) of every judgment over one namespace."""
    rows = conn.execute(query("querylog/judged"), (ns_id,)).fetchall()
    return rows
