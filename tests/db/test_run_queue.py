"""The work queue of a run (``kbctl.store.queue``): claims under a lease, taken over once the lease
has expired, settled once, given up after ``MAX_ATTEMPTS``, and only while the run's own coordinator
is alive (the connection that started the run holds the run's lock). A lease of 0 seconds is expired
from the next statement on, so these tests need no clock."""

from __future__ import annotations

import json
import time

import pytest

from kbctl.store import queue, runs
from kbctl.store.connection import scalar
from kbctl.store.queries import query
from kbctl.types import ItemError


def _run(kb, items: int):
    conn = kb.connection()
    ns = kb.create_namespace("docs", "hash-384")
    run_id = runs.start_run(conn, ns, "ingest", {})
    queue.enqueue(conn, ns, run_id, 0, [(f"/corpus/{i}.md", f"{i}.md") for i in range(items)])
    return conn, ns, run_id


def _kill(coordinator, conn) -> None:
    """Close the coordinator's connection and wait until its server process has ended: the run's
    lock is released when the backend exits, which follows the client's close asynchronously (under
    load, the next statement could otherwise still see the lock held)."""
    pid = coordinator.info.backend_pid
    coordinator.close()
    for _ in range(500):
        if not conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            return
        time.sleep(0.01)
    raise AssertionError(f"the coordinator's server process {pid} did not end")


def _coordinated(kb, items: int):
    """A run started by a coordinator on a connection of its own (closing it kills the coordinator)."""
    conn = kb.connection()
    ns = kb.create_namespace("docs", "hash-384")
    coordinator = kb.session.tenant_connection()
    run_id = runs.start_run(coordinator, ns, "ingest", {})
    queue.enqueue(coordinator, ns, run_id, 0, [(f"/corpus/{i}.md", f"{i}.md") for i in range(items)])
    return conn, coordinator, ns, run_id


def test_nothing_is_claimed_once_the_runs_coordinator_is_gone(kb):
    conn, coordinator, ns, run_id = _coordinated(kb, 3)
    assert [c.item for c in queue.claim(conn, ns.id, run_id, "a", 2, 60)] == [0, 1]
    assert queue.open_runs(conn, [ns.id]) == [(ns.id, run_id)]
    _kill(coordinator, conn)
    assert queue.claim(conn, ns.id, run_id, "a", 2, 60) == []
    assert queue.open_runs(conn, [ns.id]) == []


def test_a_dead_runs_items_are_not_claimed_while_a_swap_or_another_run_holds_the_namespace_lock(kb):
    # The namespace's ingest lock is held by a swap (or a new run's coordinator) after the run's own
    # coordinator was killed: the run's orphaned workers (`kbctl worker --run ID`) must not write.
    conn, coordinator, ns, run_id = _coordinated(kb, 3)
    _kill(coordinator, conn)
    other = kb.session.tenant_connection()
    try:
        with runs.namespace_lock(other, ns):
            assert queue.claim(conn, ns.id, run_id, "a", 2, 60) == []
            assert queue.open_runs(conn, [ns.id]) == []
    finally:
        other.close()


def test_a_run_that_was_closed_gets_no_more_claims_though_its_coordinator_lives_on(kb):
    conn, coordinator, ns, run_id = _coordinated(kb, 3)
    try:
        runs.finish_run(coordinator, ns, run_id, "failed", {})
        assert queue.claim(conn, ns.id, run_id, "a", 2, 60) == []
        # a second run on the same connection (a long-lived server's) is its own: the first stays closed
        second = runs.start_run(coordinator, ns, "ingest", {})
        queue.enqueue(coordinator, ns, second, 0, [("/corpus/x.md", "x.md")])
        assert queue.claim(conn, ns.id, run_id, "a", 2, 60) == []
        assert [c.item for c in queue.claim(conn, ns.id, second, "a", 2, 60)] == [0]
    finally:
        coordinator.close()


def test_a_batch_whose_first_item_was_taken_over_keeps_its_counts_and_records_only_its_own_errors(kb):
    conn, coordinator, ns, run_id = _coordinated(kb, 3)
    try:
        a = queue.claim(conn, ns.id, run_id, "a", 3, 0)  # a stalls: its leases expire at once
        assert [c.item for c in a] == [0, 1, 2]
        (b,) = queue.claim(conn, ns.id, run_id, "b", 1, 60, floor=3)  # b takes over the first item
        assert b.item == 0
        errors = [ItemError("extract", f"file:///corpus/{i}.md", "ExtractError", "broken") for i in (0, 1)]
        item_of = {f"file:///corpus/{i}.md": i for i in range(3)}
        counts = {"documents": {"new": 2, "failed": 1}, "chunks": {"embedded": 5}}
        per_item = {0: {"documents": {"new": 1}, "chunks": {"embedded": 3}}, 1: {"documents": {"failed": 1}}}
        settled = queue.settle(coordinator, ns, run_id, "a", [0, 1, 2], [0, 1], counts, errors, item_of, per_item)
        assert settled == {1, 2}
        # the batch's counts were kept (they went on its first item, which was b's to settle), less
        # what item 0 added to them: b counts it
        kept = {"documents": {"new": 1, "failed": 1}, "chunks": {"embedded": 2}}
        assert queue.batch_counts(conn, ns.id, run_id) == [kept]
        # item 0's error is b's to record (b stores it again): only item 1's is a's
        recorded = runs.list_errors(conn, [ns.id], run_id)
        assert [r["source"] for r in recorded] == ["file:///corpus/1.md"]
    finally:
        coordinator.close()


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


def test_a_polling_worker_sees_only_runs_with_items_to_claim_and_their_coordinator_alive(kb):
    conn, coordinator, ns, run_id = _coordinated(kb, 1)
    try:
        assert queue.open_runs(conn, [ns.id]) == [(ns.id, run_id)]
        (c,) = queue.claim(conn, ns.id, run_id, "a", 1, 60)
        queue.settle(conn, ns, run_id, "a", [c.item], [], {})
        assert queue.open_runs(conn, [ns.id]) == []  # nothing left to claim
    finally:
        coordinator.close()


def test_a_worker_of_a_run_whose_coordinator_was_killed_stops_instead_of_waiting_for_ever(kb, kb_home, tenant):
    """``kbctl worker --run ID`` stops when its run is over; a run whose ``kbctl ingest`` was killed
    (SIGKILL, a lost machine) stays ``running`` until the namespace's next run, so its workers,
    the coordinator's own local ones included (orphaned), polled for ever, holding their
    connections, though nothing could be claimed from that run again. A run without a live
    coordinator is over for its workers: they say so and stop."""
    import subprocess

    from tests.db.test_ingest_workers import _kbctl

    conn, coordinator, _, run_id = _coordinated(kb, 3)
    _kill(coordinator, conn)
    p = _kbctl(kb_home, tenant, "worker", "--run", str(run_id), "--poll", "0.1", "--json")
    try:
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"kbctl worker --run {run_id} went on polling a run whose coordinator is gone") from None
    assert p.returncode == 0, err.decode()
    assert json.loads(out)["items"] == 0
    assert f"run {run_id}" in err.decode() and "coordinator" in err.decode(), err.decode()
    assert [r["status"] for r in kb.runs("docs")] == ["running"]  # the next run marks it interrupted


def _started(kb, name: str, items: int):
    """A run of namespace ``name`` with ``items`` queued, started by a coordinator on a connection
    of its own (closing it kills the coordinator)."""
    ns = kb.create_namespace(name, "hash-384")
    coordinator = kb.session.tenant_connection()
    run_id = runs.start_run(coordinator, ns, "ingest", {})
    queue.enqueue(coordinator, ns, run_id, 0, [(f"/corpus/{i}.md", f"{i}.md") for i in range(items)])
    return coordinator, ns, run_id


def test_runs_and_progress_tell_a_killed_run_from_a_live_one(kb, cli):
    """A run whose process was killed (SIGKILL, out of memory, a lost machine) stays ``running`` in
    the ledger until the namespace's next run marks it ``interrupted``: ``kbctl runs`` and ``kbctl
    progress`` (table and ``--json``, and ``kb.runs``/``kb.run_progress``) showed it as a live run.
    Each row now says whether a process runs it (``alive``: its coordinator holds the run's lock),
    the stored status unchanged, and the table says ``no process`` of a dead one."""
    conn = kb.connection()
    dead, _, dead_id = _started(kb, "killed", 2)
    _kill(dead, conn)
    live, _, live_id = _started(kb, "live", 2)
    done, done_ns, done_id = _started(kb, "ended", 1)
    runs.finish_run(done, done_ns, done_id, "ok", {})
    try:
        want = {dead_id: ("running", False), live_id: ("running", True), done_id: ("ok", False)}
        for rows in (kb.runs(), kb.run_progress(), kb["killed"].runs() + kb["live"].runs()):
            shown = {r["run_id"]: (r["status"], r["alive"]) for r in rows if r["run_id"] in want}
            assert shown == {k: v for k, v in want.items() if k in shown} and dead_id in shown, rows
        for command in ("runs", "progress"):
            rows = json.loads(cli(command, "--json", check=True).stdout)
            assert {r["run_id"]: (r["status"], r["alive"]) for r in rows} == want, (command, rows)
            p = cli(command, check=True)
            cells = [[c.strip() for c in line.split("│")[1:]] for line in p.stdout.decode().splitlines()]
            lines = {r: [" ".join(c) for c in cells if c and c[0] == str(r)] for r in want}
            assert "no process" in lines[dead_id][0], (command, p.stdout.decode())
            assert "no process" not in lines[live_id][0] + lines[done_id][0], (command, p.stdout.decode())
            err = p.stderr.decode()
            assert f"run {dead_id}" in err and "interrupted" in err and f"run {live_id}" not in err, (command, err)
    finally:
        live.close()
        done.close()


def test_a_run_is_never_seen_running_before_its_coordinator_holds_its_lock(kb, monkeypatch):
    """``start_run`` wrote the run's row (committed at once) and then took the run's lock: a look in
    between saw a ``running`` run that no process held, as a killed one (``kbctl runs`` would call
    a run that had just started dead). The row is seen only with its lock held."""
    ns = kb.create_namespace("starting", "hash-384")
    coordinator = kb.session.tenant_connection()
    seen: list[list[dict]] = []
    scalar = runs.scalar

    def look_from_elsewhere(cur):
        value = scalar(cur)
        seen.append([r for r in kb.runs("starting") if r["status"] == "running"])
        return value

    monkeypatch.setattr(runs, "scalar", look_from_elsewhere)
    try:
        run_id = runs.start_run(coordinator, ns, "ingest", {})
        monkeypatch.undo()
        assert seen and all(r["alive"] for rows in seen for r in rows), seen
        assert [(r["run_id"], r["alive"]) for r in kb.runs("starting")] == [(run_id, True)]
    finally:
        coordinator.close()


def test_stats_and_metrics_count_a_killed_run_apart_from_live_ones(kb):
    """``kbctl stats`` and ``/metrics``' ``kbctl_ingest_runs`` counted a killed run as ``running``,
    as a live one: an alert on runs left running could not tell them apart. Each namespace's figures
    now have ``dead_runs`` (a ``running`` run whose coordinator holds no lock), and the metrics a
    gauge ``kbctl_ingest_dead_runs``; ``runs_by_status`` stays the ledger's."""
    from kbctl.server.metrics import _Ledger

    conn = kb.connection()
    dead, _, _ = _started(kb, "killed_s", 1)
    _kill(dead, conn)
    live, _, _ = _started(kb, "live_s", 1)
    try:
        stats = kb.stats()
        rows = {r["name"]: r for r in stats["namespaces"]}
        assert rows["killed_s"]["runs_by_status"] == rows["live_s"]["runs_by_status"] == {"running": 1}
        assert (rows["killed_s"]["dead_runs"], rows["live_s"]["dead_runs"]) == (1, 0)
        assert stats["totals"]["dead_runs"] == 1
        families = {f.name: f for f in _Ledger(kb.stats).collect()}
        dead_runs = {s.labels["namespace"]: s.value for s in families["kbctl_ingest_dead_runs"].samples}
        assert dead_runs == {"killed_s": 1, "live_s": 0}, dead_runs
    finally:
        live.close()


def test_a_run_lock_is_seen_held_by_the_same_functions_that_take_it_even_past_the_integer_range(kb):
    # One spelling of a run's lock (migration 022): ``kbctl.run_lock_key`` folds a run id into the
    # lock's integer key, ``run_coordinated`` and ``held_run_keys`` read pg_locks. A run id past
    # 2**31 (a bigint sequence gets there) must fold, not overflow, on both sides.
    conn = kb.connection()
    holder = kb.session.tenant_connection()
    big = 2**31 + 7
    holder.execute(query("runs/lock_run"), (runs.RUN_CLASS, big))
    try:
        assert scalar(conn.execute("SELECT kbctl.run_coordinated(%s, %s)", (runs.RUN_CLASS, big)))
        keys = {k for (k,) in conn.execute("SELECT * FROM kbctl.held_run_keys(%s)", (runs.RUN_CLASS,))}
        assert 7 in keys
        assert not scalar(conn.execute("SELECT kbctl.run_coordinated(%s, %s)", (runs.RUN_CLASS, big + 1)))
        assert not scalar(conn.execute("SELECT kbctl.run_coordinated(%s, %s)", (runs.LOCK_CLASS, big)))
    finally:
        holder.execute(query("runs/unlock_run"), (runs.RUN_CLASS, big))
    assert not scalar(conn.execute("SELECT kbctl.run_coordinated(%s, %s)", (runs.RUN_CLASS, big)))


def test_a_worker_that_cannot_make_its_namespaces_context_claims_nothing(kb):
    # A worker whose configuration lacks the profile the namespace is pinned to (or whose ACLs do not
    # read) failed after claiming a batch: the batch waited for its lease, and a worker restarted
    # by its supervisor spent the items' attempts until they ended as WorkerLost. The context is
    # made before anything is claimed.
    from kbctl.errors import ConfigError
    from kbctl.ingest import workers

    conn, coordinator, ns, run_id = _coordinated(kb, 3)
    try:

        def context(ns_id: int):
            raise ConfigError("profile 'elsewhere' is not defined in this configuration")

        for _ in range(2):  # a worker started again by its supervisor
            with pytest.raises(ConfigError):
                workers.work(
                    conn,
                    connect=kb.session.tenant_connection,
                    context=context,
                    namespaces=lambda: [ns.id],
                    run_id=run_id,
                    options=workers.WorkerOptions(poll=0.05, lease=60),
                )
        p = queue.progress(conn, ns.id, run_id)
        assert (p["queued"], p["claimed"], p["expired"]) == (3, 0, 0), p
        attempts = [a for (a,) in conn.execute("SELECT attempts FROM kbctl.run_items WHERE run_id = %s", (run_id,))]
        assert attempts == [0, 0, 0]
    finally:
        coordinator.close()
