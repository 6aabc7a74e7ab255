"""The run ledger: one row per ingest run, one per failed item, and the per-namespace ingest lock."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator, Sequence

from ..errors import LockTimeout
from ..types import ItemError
from .namespaces import Namespace

__all__ = ["start_run", "finish_run", "record_errors", "list_runs", "list_errors", "namespace_lock", "failed_sources"]

LOCK_CLASS = 0x6B62  # "kb": advisory lock class for namespace ingest locks


@contextmanager
def namespace_lock(conn, ns: Namespace, *, wait: bool = True) -> Iterator[None]:
    """Hold the namespace's ingest lock: a second ingest waits, or fails at once with ``wait=False``."""
    if wait:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, ns.id))
    else:
        got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, ns.id)).fetchone()[0]
        if not got:
            raise LockTimeout(
                f"another ingest into namespace {ns.name!r} is running",
                hint="wait for it to finish, or run without --no-wait to queue behind it",
            )
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, ns.id))


def start_run(conn, ns: Namespace, command: str, options: dict) -> int:
    """Open a run row; runs left 'running' by a killed process are marked 'interrupted' first."""
    conn.execute(
        "UPDATE kbctl.runs SET status = 'interrupted', finished_at = now() WHERE namespace_id = %s AND status = 'running'",
        (ns.id,),
    )
    row = conn.execute(
        "INSERT INTO kbctl.runs (namespace_id, command, options) VALUES (%s, %s, %s) RETURNING id",
        (ns.id, command, json.dumps(options, default=str)),
    ).fetchone()
    return int(row[0])


def finish_run(conn, ns: Namespace, run_id: int, status: str, counts: dict) -> None:
    conn.execute(
        "UPDATE kbctl.runs SET status = %s, counts = %s, finished_at = now() WHERE namespace_id = %s AND id = %s",
        (status, json.dumps(counts, default=str), ns.id, run_id),
    )


def record_errors(conn, ns: Namespace, run_id: int, errors: Sequence[ItemError]) -> None:
    if not errors:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO kbctl.run_errors (namespace_id, run_id, stage, source, error_class, message)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            [(ns.id, run_id, e.stage, e.source, e.error_class, e.message) for e in errors],
        )


def failed_sources(conn, ns: Namespace) -> list[str]:
    """Sources that failed in the latest run that had failures and have not been retried since."""
    rows = conn.execute(
        "SELECT DISTINCT source FROM kbctl.run_errors WHERE namespace_id = %s AND NOT retried"
        " AND run_id = (SELECT max(run_id) FROM kbctl.run_errors WHERE namespace_id = %s)",
        (ns.id, ns.id),
    )
    return [r[0] for r in rows]


def mark_retried(conn, ns: Namespace, sources: Sequence[str]) -> None:
    conn.execute(
        "UPDATE kbctl.run_errors SET retried = true WHERE namespace_id = %s AND source = ANY(%s)", (ns.id, list(sources))
    )


def list_runs(conn, ns_ids: Sequence[int], limit: int = 20) -> list[dict]:
    cur = conn.execute(
        "SELECT r.id AS run_id, n.name AS namespace, r.command, r.status, r.started_at, r.finished_at, r.counts,"
        " (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = r.namespace_id AND e.run_id = r.id) AS errors"
        " FROM kbctl.runs r JOIN kbctl.namespaces n ON n.id = r.namespace_id"
        " WHERE r.namespace_id = ANY(%s) ORDER BY r.started_at DESC, r.id DESC LIMIT %s",
        (list(ns_ids), limit),
    )
    cols = [c.name for c in cur.description]
    return [_jsonable(dict(zip(cols, r))) for r in cur]


def list_errors(conn, ns_ids: Sequence[int], run_id: int | None = None, limit: int = 100) -> list[dict]:
    q = (
        "SELECT e.run_id, n.name AS namespace, e.stage, e.source, e.error_class, e.message, e.retried, e.created_at"
        " FROM kbctl.run_errors e JOIN kbctl.namespaces n ON n.id = e.namespace_id WHERE e.namespace_id = ANY(%s)"
    )
    params: list = [list(ns_ids)]
    if run_id is not None:
        q += " AND e.run_id = %s"
        params.append(run_id)
    cur = conn.execute(q + " ORDER BY e.created_at DESC, e.id DESC LIMIT %s", [*params, limit])
    cols = [c.name for c in cur.description]
    return [_jsonable(dict(zip(cols, r))) for r in cur]


def _jsonable(d: dict) -> dict:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in d.items()}
