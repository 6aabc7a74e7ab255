"""The work queue of a run (``kbctl.store.queue``): claims under a lease, taken over once the lease
has expired, settled once, given up after ``MAX_ATTEMPTS``, and only while the coordinator holds
the namespace's ingest lock. A lease of 0 seconds is expired from the next statement on, so these
tests need no clock."""

from __future__ import annotations

from kbctl.store import queue, runs


def _run(kb, items: int):
    conn = kb.connection()
    ns = kb.create_namespace("docs", "hash-384")
    run_id = runs.start_run(conn, ns, "ingest", {})
    queue.enqueue(conn, ns, run_id, 0, [(f"/corpus/{i}.md", f"{i}.md") for i in range(items)])
    return conn, ns, run_id


def test_nothing_is_claimed_unless_the_runs_coordinator_holds_the_namespace_lock(kb):
    conn, ns, run_id = _run(kb, 3)
    assert queue.claim(conn, ns.id, run_id, "a", 2, 60) == []
    with runs.namespace_lock(conn, ns):
        assert [c.item for c in queue.claim(conn, ns.id, run_id, "a", 2, 60)] == [0, 1]


def test_an_expired_lease_is_claimed_again_and_settled_by_its_new_worker_only(kb):
    conn, ns, run_id = _run(kb, 4)
    with runs.namespace_lock(conn, ns):
        a = queue.claim(conn, ns.id, run_id, "a", 2, 0)  # leased for no time: a stalled worker
        b = queue.claim(conn, ns.id, run_id, "b", 2, 60)
        assert [c.item for c in a] == [0, 1] and [c.item for c in b] == [2, 3]  # the queue ahead first
        assert queue.progress(conn, ns.id, run_id)["expired"] == 2
        taken = queue.claim(conn, ns.id, run_id, "b", 8, 60, floor=4)  # nothing ahead: what expired
        assert [(c.item, c.attempt) for c in taken] == [(0, 2), (1, 2)]
        assert queue.settle(conn, ns, run_id, "a", [0, 1], [], {}) == set()  # no longer a's
        assert queue.renew(conn, ns.id, run_id, "a", [0, 1], 60) == set()
        assert queue.settle(conn, ns, run_id, "b", [0, 1, 2, 3], [3], {"documents": {"new": 3, "failed": 1}}) == {
            0,
            1,
            2,
            3,
        }
        p = queue.progress(conn, ns.id, run_id)
        assert (p["done"], p["failed"], p["queued"], p["claimed"], p["expired"]) == (3, 1, 0, 0, 0)
        assert queue.batch_counts(conn, ns.id, run_id) == [{"documents": {"new": 3, "failed": 1}}]
        assert queue.claim(conn, ns.id, run_id, "c", 8, 60) == []


def test_an_item_whose_workers_all_died_is_given_up_after_the_last_attempt(kb):
    conn, ns, run_id = _run(kb, 1)
    with runs.namespace_lock(conn, ns):
        for attempt in range(1, queue.MAX_ATTEMPTS + 1):
            (c,) = queue.claim(conn, ns.id, run_id, f"w{attempt}", 1, 0)
            assert c.attempt == attempt
        assert queue.claim(conn, ns.id, run_id, "last", 1, 60) == []
        p = queue.progress(conn, ns.id, run_id)
        assert p["queued"] + p["claimed"] + p["expired"] == 0  # the coordinator stops waiting
        assert queue.abandon(conn, ns.id, run_id) == [("/corpus/0.md", queue.MAX_ATTEMPTS)]
        assert queue.progress(conn, ns.id, run_id)["failed"] == 1


def test_a_polling_worker_sees_only_runs_whose_coordinator_is_alive(kb):
    conn, ns, run_id = _run(kb, 1)
    assert queue.open_runs(conn, [ns.id]) == []  # no coordinator holds the namespace's lock
    with runs.namespace_lock(conn, ns):
        assert queue.open_runs(conn, [ns.id]) == [(ns.id, run_id)]
        (c,) = queue.claim(conn, ns.id, run_id, "a", 1, 60)
        queue.settle(conn, ns, run_id, "a", [c.item], [], {})
        assert queue.open_runs(conn, [ns.id]) == []  # nothing left to claim
