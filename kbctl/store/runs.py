"""The run ledger: one row per ingest run, one per failed item, and the per-namespace ingest lock."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator, Sequence

from ..errors import LockTimeout
from ..types import ItemError
from .connection import Conn, columns, scalar
from .namespaces import Namespace, write_lock
from .queries import query

__all__ = [
    "write_lock",
    "start_run",
    "finish_run",
    "record_errors",
    "list_runs",
    "list_errors",
    "namespace_lock",
    "failed_sources",
]

LOCK_CLASS = 0x6B62  # "kb": advisory lock class for namespace ingest locks
#: Advisory lock class of an open run, held by its coordinator (``start_run`` to ``finish_run``): the
#: run's workers claim only while it is held (``store.queue``). Its second key is the run id folded
#: into 31 bits.
RUN_CLASS = 0x6B64
# (0x6B65 is a generation's index build: ``kbctl.store.generations.INDEX_CLASS``)


@contextmanager
def namespace_lock(conn: Conn, ns: Namespace, *, wait: bool = True) -> Iterator[None]:
    """Hold the namespace's ingest lock: a second ingest waits, or fails at once with ``wait=False``."""
    if wait:
        conn.execute(query("runs/lock_namespace"), (LOCK_CLASS, ns.id))
    else:
        got = scalar(conn.execute(query("runs/try_lock_namespace"), (LOCK_CLASS, ns.id)))
        if not got:
            raise LockTimeout(
                f"another ingest into namespace {ns.name!r} is running",
                hint="wait for it to finish, or run without --no-wait to queue behind it",
            )
    try:
        yield
    finally:
        conn.execute(query("runs/unlock_namespace"), (LOCK_CLASS, ns.id))


def start_run(conn: Conn, ns: Namespace, command: str, options: dict) -> int:
    """Open a run row; runs left 'running' by a killed process are marked 'interrupted' first.
    The connection is the run's coordinator: it holds the run's lock (``RUN_CLASS``) until
    ``finish_run``, or until it closes (killed), and the run's workers claim only meanwhile."""
    conn.execute(query("runs/interrupt_runs"), (ns.id,))
    # the row and its lock in one transaction: no one sees the run 'running' before it is held, as
    # a killed run's would be (``list_runs``' alive, the workers' ``queue.coordinated``)
    with conn.transaction():
        run_id = int(scalar(conn.execute(query("runs/start_run"), (ns.id, command, json.dumps(options, default=str)))))
        conn.execute(query("runs/lock_run"), (RUN_CLASS, run_id))
    return run_id


def finish_run(conn: Conn, ns: Namespace, run_id: int, status: str, counts: dict) -> None:
    """Close a run row and release the run's lock (its workers claim nothing more)."""
    conn.execute(query("runs/finish_run"), (status, json.dumps(counts, default=str), ns.id, run_id))
    conn.execute(query("runs/unlock_run"), (RUN_CLASS, run_id))


def record_errors(conn: Conn, ns: Namespace, run_id: int, errors: Sequence[ItemError]) -> None:
    if not errors:
        return
    with conn.cursor() as cur:
        cur.executemany(
            query("runs/record_error"),
            [(ns.id, run_id, e.stage, e.source, e.error_class, e.message) for e in errors],
        )


def failed_sources(conn: Conn, ns: Namespace) -> list[str]:
    """Sources that failed in the latest run that had failures and have not been retried since."""
    rows = conn.execute(query("runs/failed_sources"), (ns.id, ns.id))
    return [r[0] for r in rows]


def mark_retried(conn: Conn, ns: Namespace, sources: Sequence[str]) -> None:
    conn.execute(query("runs/mark_retried"), (ns.id, list(sources)))


def list_runs(conn: Conn, ns_ids: Sequence[int], limit: int = 20) -> list[dict]:
    """The latest runs, newest first, each with ``alive``: whether a process runs it now (its
    coordinator holds the run's lock). A ``running`` run that is not alive was killed; the
    namespace's next run marks it ``interrupted``. One statement, whatever the number of runs."""
    cur = conn.execute(query("runs/list_runs"), (RUN_CLASS, list(ns_ids), limit))
    cols = columns(cur)
    return [_jsonable(dict(zip(cols, r))) for r in cur]


def list_errors(conn: Conn, ns_ids: Sequence[int], run_id: int | None = None, limit: int = 100) -> list[dict]:
    if run_id is None:
        cur = conn.execute(query("runs/list_errors"), (list(ns_ids), limit))
    else:
        cur = conn.execute(query("runs/list_errors_of_run"), (list(ns_ids), run_id, limit))
    cols = columns(cur)
    return [_jsonable(dict(zip(cols, r))) for r in cur]


def _jsonable(d: dict) -> dict:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in d.items()}
