"""The work queue of a run shared by workers (migration 015): items enqueued by the run's
coordinator, claimed under a lease, settled done or failed.

Every statement here is one short transaction (the connections are autocommit): a claim is one
``UPDATE … FROM (SELECT … FOR UPDATE SKIP LOCKED)``, so no worker holds a row lock while it
works, and a long transaction elsewhere costs the queue only the dead versions of the rows it
updated since (two or three per item, HOT updates: see the migration). A claim reads from the
worker's ``floor`` (the position after the last item it claimed), not from the start of the run;
what is left behind (an item whose lease expired, a claim rolled back) is read by ``reclaim``, once
the queue ahead is empty.

Leases are timed by the server's clock (``now()``), so workers on other machines agree on them.
Items are claimed only while the run is open and its coordinator alive: the connection that started
it holds the run's lock (``runs.RUN_CLASS``, in this database) until it closes the run. A run whose
coordinator was killed gets no more writes, even while a swap or another run's coordinator holds
the namespace's ingest lock (the lock this check once read, which any of them holds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..types import ItemError
from .connection import Conn, columns, one
from .namespaces import Namespace
from .queries import query
from .runs import RUN_CLASS, record_errors

__all__ = [
    "Claimed",
    "MAX_ATTEMPTS",
    "enqueue",
    "claim",
    "renew",
    "settle",
    "progress",
    "batch_counts",
    "abandon",
    "open_runs",
    "run_status",
    "coordinated",
    "namespace_name",
    "latest_runs",
]

#: How many times an item is claimed before the run gives it up (recorded failed): a source that
#: kills its worker (out of memory, say) must not kill every worker in turn.
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Claimed:
    """One claimed item: its position in the run, its target, its path in its folder, its attempt."""

    item: int
    target: str
    rel: str | None
    attempt: int


def enqueue(conn: Conn, ns: Namespace, run_id: int, first: int, items: Sequence[tuple[str, str | None]]) -> int:
    """Add ``items`` ((target, path in its folder or None)) to the run's queue from position
    ``first``; returns the position after the last."""
    if items:
        conn.execute(query("queue/enqueue"), (ns.id, run_id, first, [t for t, _ in items], [r for _, r in items]))
    return first + len(items)


def claim(conn: Conn, ns_id: int, run_id: int, worker: str, n: int, lease: float, floor: int = 0) -> list[Claimed]:
    """Claim up to ``n`` queued items of the run from position ``floor`` on; when none is left
    there, items left behind or whose lease expired. Empty: nothing to claim now."""
    tail = (ns_id, run_id, RUN_CLASS, run_id, n, worker, float(lease))
    rows = conn.execute(query("queue/claim"), (ns_id, run_id, floor, *tail)).fetchall()
    if not rows:
        rows = conn.execute(query("queue/reclaim"), (ns_id, run_id, MAX_ATTEMPTS, *tail)).fetchall()
    return sorted((Claimed(int(i), t, r, int(a)) for i, t, r, a in rows), key=lambda c: c.item)


def renew(conn: Conn, ns_id: int, run_id: int, worker: str, items: Sequence[int], lease: float) -> set[int]:
    """Extend the worker's leases on ``items``; returns those it still holds (not taken over)."""
    rows = conn.execute(query("queue/renew"), (float(lease), ns_id, run_id, worker, list(items)))
    return {int(r[0]) for r in rows}


def settle(
    conn: Conn,
    ns: Namespace,
    run_id: int,
    worker: str,
    items: Sequence[int],
    failed: Sequence[int],
    counts: dict,
    errors: Sequence[ItemError] = (),
    item_of: Mapping[str, int] | None = None,
    item_counts: Mapping[int, dict] | None = None,
) -> set[int]:
    """Mark the worker's ``items`` done (``failed``: failed), with the batch's counts and its
    errors and warnings in the ledger, in one transaction. Returns the items settled: an item whose
    lease was taken over by another worker is that worker's to settle (it stores it again, found
    unchanged), and to count and record: what it added to this batch's counts (``item_counts``:
    item -> {"documents": {...}, "chunks": {...}}) is taken off them, and an error whose source is
    such an item (``item_of``: an item's position by source URI) is not recorded. The counts go on
    the first item this worker settled (a batch whose first item was taken over keeps them)."""
    with conn.transaction():
        args = (list(failed), ns.id, run_id, worker, list(items))
        settled = {int(r[0]) for r in conn.execute(query("queue/settle"), args).fetchall()}
        if settled:
            lost = set(items) - settled
            kept = own_counts(counts, lost, item_counts)
            conn.execute(query("queue/set_counts"), (json.dumps(kept, default=str), ns.id, run_id, min(settled)))
            item_of = item_of or {}
            record_errors(conn, ns, run_id, [e for e in errors if item_of.get(e.source) not in lost])
    return settled


def own_counts(counts: dict, lost: Iterable[int], item_counts: Mapping[int, dict] | None) -> dict:
    """A batch's counts less the share of its items ``lost`` (taken over by another worker, which
    counts them; ``item_counts`` as for ``settle``): what its worker counts of it, and records."""
    return _less(counts, [(item_counts or {}).get(i) or {} for i in sorted(lost)])


def _less(counts: dict, parts: Sequence[dict]) -> dict:
    """``counts`` (a batch's ``documents`` and ``chunks`` by kind) without what ``parts`` added."""
    out = {**counts}
    for group in ("documents", "chunks"):
        if group in counts:
            left = dict(counts[group])
            for part in parts:
                for kind, n in (part.get(group) or {}).items():
                    left[kind] = left.get(kind, 0) - int(n)
            out[group] = left
    return out


def progress(conn: Conn, ns_id: int, run_id: int) -> dict[str, int]:
    """The run's items by state (``items``, ``queued``, ``claimed`` under a live lease, ``expired``
    leases to be claimed again, ``done``, ``failed``) and ``workers`` holding a live lease."""
    cur = conn.execute(query("queue/progress"), (MAX_ATTEMPTS, ns_id, run_id))
    return {k: int(v) for k, v in zip(columns(cur), one(cur))}


def batch_counts(conn: Conn, ns_id: int, run_id: int) -> list[dict]:
    """The counts each settled batch of the run recorded (``RunReport.to_json()`` of the batch)."""
    return [r[0] for r in conn.execute(query("queue/counts"), (ns_id, run_id))]


def abandon(conn: Conn, ns_id: int, run_id: int) -> list[tuple[str, int]]:
    """Items claimed ``MAX_ATTEMPTS`` times whose last lease expired become failed: (target, attempts)."""
    return [(t, int(a)) for t, a in conn.execute(query("queue/abandoned"), (ns_id, run_id, MAX_ATTEMPTS))]


def open_runs(conn: Conn, ns_ids: Sequence[int]) -> list[tuple[int, int]]:
    """(namespace id, run id) of the running runs of these namespaces with items to claim and a live
    coordinator (one holding the run's lock), oldest first."""
    return [(int(n), int(r)) for n, r in conn.execute(query("queue/open_runs"), (list(ns_ids), RUN_CLASS))]


def run_status(conn: Conn, run_id: int) -> tuple[int, str, str] | None:
    """(namespace id, namespace name, status) of a run the tenant can see, or None."""
    row = conn.execute(query("queue/run_status"), (run_id,)).fetchone()
    return (int(row[0]), str(row[1]), str(row[2])) if row else None


def coordinated(conn: Conn, run_id: int) -> bool:
    """Whether the run's coordinator is alive (it holds the run's lock): a running run without one
    was killed, and nothing is claimed from it again (``claim``)."""
    return bool(one(conn.execute(query("queue/run_coordinated"), (RUN_CLASS, run_id)))[0])


def run_traceparent(conn: Conn, run_id: int) -> str | None:
    """The W3C traceparent stored with a run by its coordinator (its workers' spans join that trace), or None."""
    row = conn.execute(query("queue/run_traceparent"), (run_id,)).fetchone()
    return str(row[0]) if row and row[0] else None


def namespace_name(conn: Conn, ns_id: int) -> str | None:
    """The name of a namespace the tenant can see, or None."""
    row = conn.execute(query("queue/namespace_name"), (ns_id,)).fetchone()
    return str(row[0]) if row else None


def latest_runs(conn: Conn, ns_ids: Sequence[int], limit: int = 5) -> list[dict[str, Any]]:
    """The latest runs of these namespaces that had a work queue (namespace_id, namespace, run_id,
    status, started_at, the ``counts`` the run recorded when it ended, else None, and ``alive``: whether
    a process runs it now, its coordinator holding the run's lock), newest first."""
    rows = conn.execute(query("queue/latest_runs"), (RUN_CLASS, list(ns_ids), limit))
    keys = ("namespace_id", "namespace", "run_id", "status", "started_at", "counts", "alive")
    return [dict(zip(keys, (*r[:4], r[4].isoformat(), r[5], bool(r[6])))) for r in rows]
