"""Ingest workers (``kbctl ingest --workers``, ``kbctl worker``): one run's items shared through the
work queue, a killed worker's items claimed again once their lease expires, every item stored once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import ROOT

FILES = 48


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    for i in range(FILES):
        (d / f"note-{i:02d}.md").write_text(
            f"# Note {i}\n\nRefund case {i}: the customer asked about topic{i} and waited {i} days.\n\n"
            f"## Follow-up\n\nSecond section of note {i}, about shipment{i}.\n"
        )
    return d


def _kbctl(kb_home, tenant, *args: str) -> subprocess.Popen:
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    return subprocess.Popen(
        [sys.executable, "-m", "kbctl", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _wait_for(what, check, timeout: float = 120.0):
    """Poll ``check()`` until it returns something true (a deadline only against a hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.005)
    raise AssertionError(f"gave up waiting for {what}")


def _items(conn, run_id: int) -> list[tuple[int, str, str | None, int]]:
    return conn.execute(
        "SELECT item, state, worker, attempts FROM kbctl.run_items WHERE run_id = %s ORDER BY item", (run_id,)
    ).fetchall()


def _by(pid: int, worker: str | None) -> bool:
    return worker is not None and worker.endswith(f":{pid}")


def test_a_worker_killed_mid_run_leaves_every_item_stored_once_in_one_run(kb, kb_home, tenant, corpus):
    conn = kb.connection()  # the session's server is up before the processes use it
    coordinator = _kbctl(
        kb_home,
        tenant,
        "ingest",
        str(corpus),
        "-n",
        "docs",
        "-p",
        "hash-384",
        "--workers",
        "0",
        "--lease",
        "2",
        "--json",
    )

    def queued_run():
        if coordinator.poll() is not None:
            raise AssertionError(coordinator.stderr.read().decode())
        rows = kb.run_progress("docs") if "docs" in kb.namespace_names() else []
        return rows and rows[0]["items"] == FILES and rows[0]["run_id"]

    run_id = _wait_for("the coordinator to queue the run", queued_run)
    args = ("worker", "--run", str(run_id), "--lease", "2", "--batch", "3", "--poll", "0.1")
    doomed, survivor = _kbctl(kb_home, tenant, *args), _kbctl(kb_home, tenant, *args)

    # SIGKILL the doomed worker while it holds claimed items, after it settled some: frozen first
    # (SIGSTOP), so what it holds is read while it can no longer change, then killed.
    held: list[int] = []
    for _ in range(50):
        _wait_for(
            "the worker to settle a batch and claim another",
            lambda: (
                any(s == "done" and _by(doomed.pid, w) for _, s, w, _ in _items(conn, run_id))
                and any(s == "claimed" and _by(doomed.pid, w) for _, s, w, _ in _items(conn, run_id))
            ),
        )
        os.kill(doomed.pid, signal.SIGSTOP)
        held = [i for i, s, w, _ in _items(conn, run_id) if s == "claimed" and _by(doomed.pid, w)]
        if held:
            break
        os.kill(doomed.pid, signal.SIGCONT)
    assert held, "never caught the worker holding a claim"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=60)
    assert doomed.returncode == -signal.SIGKILL

    out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err.decode()
    report = json.loads(out)
    survivor.wait(timeout=120)  # it stops once the run is over
    assert survivor.returncode == 0, survivor.stderr.read().decode()

    # every item done; what the killed worker held was claimed again and finished by the survivor
    items = _items(conn, run_id)
    assert [s for _, s, _, _ in items] == ["done"] * FILES
    again = {i: (w, a) for i, _, w, a in items if i in held}
    assert all(_by(survivor.pid, w) and a >= 2 for w, a in again.values()), again
    # every item stored once: one document per file, each chunk once, the statistics agree
    docs = conn.execute(
        "SELECT count(*), count(DISTINCT source_uri) FROM kbctl.documents d"
        " JOIN kbctl.namespaces n ON n.id = d.namespace_id WHERE n.name = 'docs'"
    ).fetchone()
    assert docs == (FILES, FILES)
    chunks = conn.execute(
        "SELECT count(*), count(DISTINCT (c.document_id, c.position)), count(DISTINCT c.content_hash)"
        " FROM kbctl.chunks c JOIN kbctl.namespaces n ON n.id = c.namespace_id WHERE n.name = 'docs'"
    ).fetchone()
    assert chunks[0] == chunks[1] == chunks[2] == 2 * FILES
    assert report["documents"]["new"] + report["documents"]["unchanged"] == FILES
    assert report["documents"]["failed"] == 0 and report["verify"]["ok"] is True
    # one run in the ledger, closed ok
    runs = kb.runs("docs")
    assert [(r["run_id"], r["status"]) for r in runs] == [(run_id, "ok")]
    assert runs[0]["counts"]["documents"] == report["documents"]
    # and a run again stores nothing new
    again_report = kb.ingest([str(corpus)], "docs")
    assert again_report.documents["unchanged"] == FILES
    assert again_report.documents["new"] == again_report.documents["changed"] == 0
    assert kb.search("shipment17", "docs", mode="lexical").hits[0].title == "Note 17"


def test_workers_record_a_bad_item_once_and_the_coordinator_syncs_removed_files(cli, kb, corpus):
    (corpus / "broken.pdf").write_bytes(b"not a pdf")
    p = cli("ingest", str(corpus), "-n", "docs", "-p", "hash-384", "--workers", "1", "--lease", "5", "--json")
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["documents"]["new"] == FILES and report["documents"]["failed"] == 1
    assert [e["source"].rsplit("/", 1)[-1] for e in report["errors"]] == ["broken.pdf"]
    (run,) = kb.runs("docs")
    assert run["status"] == "partial" and run["errors"] == 1  # recorded once, by the worker
    assert [e["source"].rsplit("/", 1)[-1] for e in kb.errors("docs", run["run_id"])] == ["broken.pdf"]

    (corpus / "note-00.md").unlink()
    (corpus / "note-01.md").write_text("# Note 1\n\nRewritten: the refund was granted.\n")
    p = cli("ingest", str(corpus), "-n", "docs", "--workers", "2", "--lease", "5", "--sync", "--json")
    assert p.returncode == 0, p.stderr.decode()
    again = json.loads(p.stdout)["documents"]
    assert (again["removed"], again["changed"], again["unchanged"], again["failed"]) == (1, 1, FILES - 2, 1)
    assert kb.run_progress("docs")[0]["done"] + kb.run_progress("docs")[0]["failed"] == FILES
    assert kb.search("granted", "docs", mode="lexical").hits[0].title == "Note 1"


def test_a_polling_worker_finds_the_run_stores_it_and_exits_when_idle(cli, kb, kb_home, tenant, corpus):
    kb.connection()  # the session's server is up before the coordinator's process uses it
    coordinator = _kbctl(kb_home, tenant, "ingest", str(corpus), "-n", "docs", "-p", "hash-384", "--workers", "0")
    _wait_for(
        "the coordinator to queue the run",
        lambda: "docs" in kb.namespace_names() and (kb.run_progress("docs") or [{}])[0].get("items") == FILES,
    )
    p = cli("worker", "-n", "docs", "--exit-idle", "--poll", "0.1", "--json")
    assert p.returncode == 0, p.stderr.decode()
    did = json.loads(p.stdout)
    assert (did["items"], did["new"]) == (FILES, FILES)
    _, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err.decode()
    (run,) = kb.runs("docs")
    assert run["status"] == "ok" and run["counts"]["documents"]["new"] == FILES


def test_a_worker_whose_batch_meets_a_swap_leaves_that_batch_and_goes_on(
    cli, kb, kb_home, tenant, corpus, monkeypatch, caplog
):
    """A batch refused because its namespace moved to another generation while it was embedded
    (``store.documents.still_active``) wrote nothing; the worker, which may serve other runs and
    namespaces, used to exit on it. It now leaves the batch to its lease (claimed again, by a
    worker with the namespace read again, if the run lives on) and goes on."""
    from kbctl.errors import ProfileMismatchError
    from kbctl.ingest import workers

    real, calls = workers._store, []

    def refused_once(conn, lookup, connect, ctx, run_id, got, *a, **kw):
        calls.append(len(got))
        if len(calls) == 1:
            raise ProfileMismatchError("namespace 'docs' moved to another generation while this batch was embedded")
        return real(conn, lookup, connect, ctx, run_id, got, *a, **kw)

    monkeypatch.setattr(workers, "_store", refused_once)
    kb.connection()
    coordinator = _kbctl(kb_home, tenant, "ingest", str(corpus), "-n", "docs", "-p", "hash-384", "--workers", "0")
    _wait_for(
        "the coordinator to queue the run",
        lambda: "docs" in kb.namespace_names() and (kb.run_progress("docs") or [{}])[0].get("items") == FILES,
    )
    p = cli("worker", "-n", "docs", "--exit-idle", "--poll", "0.1", "--lease", "1", "--json")
    assert p.returncode == 0, p.stderr.decode()
    said = [r for r in caplog.records if "moved to another generation" in r.getMessage()]
    assert [r.levelname for r in said] == ["WARNING"]  # said once, as a warning
    did = json.loads(p.stdout)
    assert did["new"] == FILES and did["items"] == FILES  # the refused batch was claimed again and stored
    _, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err.decode()
    (run,) = kb.runs("docs")
    assert run["status"] == "ok" and run["counts"]["documents"]["new"] == FILES


@dataclass(frozen=True)
class Queued:
    """A run of namespace ``docs`` whose coordinator (``coordinator``, holding the run's lock)
    queued three notes (items 0, 1, 2); ``lookup``: a connection for a batch's lookups."""

    ns: Any
    run_id: int
    coordinator: Any
    lookup: Any


@pytest.fixture
def three_queued(kb, tmp_path):
    from kbctl.store import queue, runs

    d = tmp_path / "c"
    d.mkdir()
    for i in range(3):
        (d / f"{i}.md").write_text(f"# Note {i}\n\nThe quorvax note number {i}, about topic{i}.\n")
    ns = kb.create_namespace("docs", "hash-384")
    coordinator = kb.session.tenant_connection()
    lookup = kb.session.tenant_connection()
    try:
        run_id = runs.start_run(coordinator, ns, "ingest", {})
        queue.enqueue(coordinator, ns, run_id, 0, [(str(d / f"{i}.md"), f"{i}.md") for i in range(3)])
        yield Queued(ns, run_id, coordinator, lookup)
    finally:
        coordinator.close()
        lookup.close()


def _store_as(kb, conn, queued: Queued, got, name: str) -> None:
    """Store and settle the claimed items ``got`` as worker ``name`` would (one batch)."""
    from kbctl.ingest import workers

    ctx = workers.WorkerContext(queued.ns, kb.namespaces.search_profile(queued.ns))
    options = workers.WorkerOptions(name=name, lease=60)
    workers._store(conn, queued.lookup, kb.session.tenant_connection, ctx, queued.run_id, got, options, lambda *e: None)


def _documents(batches: list[dict]) -> dict[str, int]:
    return {k: sum(c["documents"].get(k, 0) for c in batches) for k in ("new", "changed", "unchanged")}


def test_an_item_taken_over_is_counted_once_by_the_worker_that_settled_it(kb, three_queued):
    """Worker a stalls past its lease; b takes over its first item. a stores the three items and
    settles the two still its own; b finds the first one stored (unchanged) and settles it. Both
    batches counted that item, so the run reported 4 documents for 3 items (and a's embedded chunk
    of it besides). The worker whose item was taken over no longer counts it."""
    from kbctl.store import queue

    ns, run_id = three_queued.ns, three_queued.run_id
    conn = kb.connection()
    a = queue.claim(conn, ns.id, run_id, "a", 3, 0)  # a stalls: its leases expire at once
    (b,) = queue.claim(conn, ns.id, run_id, "b", 1, 60, floor=3)  # b takes over the first item
    assert [c.item for c in a] == [0, 1, 2] and b.item == 0
    _store_as(kb, conn, three_queued, a, "a")
    _store_as(kb, conn, three_queued, [b], "b")
    batches = queue.batch_counts(conn, ns.id, run_id)
    assert _documents(batches) == {"new": 2, "changed": 0, "unchanged": 1}, batches  # 3 items, 3 documents
    a_counts = next(c for c in batches if c["documents"]["new"])
    assert a_counts["chunks"] == {"embedded": 2, "reused": 0, "deleted": 0}  # its own two items' chunks
    p = queue.progress(conn, ns.id, run_id)
    assert (p["done"], p["failed"]) == (3, 0)


def test_a_workers_own_counts_leave_out_an_item_another_worker_took_over(kb, three_queued, monkeypatch):
    """What a worker reports (``kbctl worker --json``: ``work``'s totals) counted every item of its
    batches, those another worker took over included: worker a, whose first item b took over (its
    lease expired while a stored it; b found it stored, unchanged, and settled it), reported 3 items
    and 3 new documents (3 chunks embedded) where the run counts 2 of them as a's, and the workers'
    reports summed to 4 documents for 3 items. A worker counts the items it settled, as the run
    does, and says how many of its items were taken over."""
    from kbctl.ingest import workers
    from kbctl.store import queue

    ns, run_id = three_queued.ns, three_queued.run_id
    real = workers.store_sources
    taken: list[int] = []

    def store_then_lose_the_first_item(conn, req, report, lookup=None):
        real(conn, req, report, lookup=lookup)
        if taken:
            return  # b's batch
        other = kb.session.tenant_connection()
        try:  # a's lease of item 0 runs out; b claims it, stores it (found unchanged) and settles it
            other.execute(
                "UPDATE kbctl.run_items SET claimed_until = now() - interval '1 second'"
                " WHERE namespace_id = %s AND run_id = %s AND item = 0",
                (ns.id, run_id),
            )
            (b,) = queue.claim(other, ns.id, run_id, "b", 1, 60, floor=3)
            taken.append(b.item)
            _store_as(kb, other, three_queued, [b], "b")
        finally:
            other.close()

    monkeypatch.setattr(workers, "store_sources", store_then_lose_the_first_item)
    totals = kb.work(["docs"], batch=3, poll=0.1, exit_idle=True)
    assert taken == [0]
    batches = queue.batch_counts(kb.connection(), ns.id, run_id)
    assert _documents(batches) == {"new": 2, "changed": 0, "unchanged": 1}, batches
    assert (totals["batches"], totals["items"], totals.get("taken_over")) == (1, 2, 1), totals
    own = {k: totals.get(k, 0) for k in ("new", "changed", "unchanged", "failed", "chunks_embedded")}
    assert own == {"new": 2, "changed": 0, "unchanged": 0, "failed": 0, "chunks_embedded": 2}, totals
    # with b's one unchanged document, the workers' counts are the run's
    assert own["new"] + own["changed"] + own["unchanged"] + 1 == sum(_documents(batches).values())


def _message(n: int) -> str:
    return (
        f"From sender{n}@example.org Mon Oct 21 08:0{n}:00 2024\nMessage-ID: <m{n}@example.org>\n"
        f"From: Sender {n} <sender{n}@example.org>\nSubject: Question {n}\n"
        f"Date: Mon, 21 Oct 2024 08:0{n}:00 +0000\n\nThe body of message {n}: about the zorblat{n} setting.\n\n"
    )


def test_progress_and_the_worker_line_count_removed_documents_as_runs_does(kb, cli, cli_process, tmp_path):
    """A run shared by workers removed two documents: a message gone from its mbox (by the worker
    that read the mbox again) and, with --sync, a deleted file (by the coordinator). ``kbctl runs``
    said ``removed=2``; ``kbctl progress`` said ``removed=1`` (the queue's batches only) and the
    worker's summary line on stderr named no removal at all."""
    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text("".join(_message(n) for n in (1, 2, 3)))
    (box / "note.md").write_text("# Note\n\nA note beside the mailbox.\n")
    assert kb.ingest([str(box)], "mail", verify=False).documents["new"] == 4
    mbox.write_text("".join(_message(n) for n in (1, 3)))
    (box / "note.md").unlink()
    p = cli_process("ingest", str(box), "-n", "mail", "--workers", "1", "--sync", "--no-verify")
    err = p.stderr.decode()
    assert p.returncode == 0, err
    (worker_line,) = [line for line in err.splitlines() if line.startswith("worker:")]
    assert "1 removed" in worker_line, worker_line  # the mbox's message; the file was the coordinator's
    run = json.loads(cli("runs", "-n", "mail", "--json", check=True).stdout)[0]
    assert run["counts"]["documents"]["removed"] == 2, run
    (shown,) = json.loads(cli("progress", "-n", "mail", "--json", check=True).stdout)
    assert shown["run_id"] == run["run_id"], (shown, run)
    assert shown["documents"] == run["counts"]["documents"], (shown, run)
    assert shown["chunks"]["deleted"] == run["counts"]["chunks"]["deleted"] == 2, (shown, run)
    table = cli("progress", "-n", "mail", check=True).stdout.decode()
    assert "removed=2" in table, table


def test_a_distributed_run_that_ends_in_an_interrupt_records_what_its_workers_stored(
    kb, kb_home, tenant, corpus, monkeypatch
):
    """A run shared by workers sums their batches' counts once its queue is empty; one that ended
    otherwise (Ctrl-C, its local workers gone) was closed with its coordinator's counts alone, so
    ``kbctl runs`` said nothing was stored where ``kbctl progress`` counted the workers' batches.
    It now sums them however the wait ends (what the workers stored is stored)."""
    import kbctl
    from kbctl.ingest.workers import Coordinator

    other = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384")

    def a_worker_stores_everything_then_ctrl_c(self, conn, req, report, procs, interruptible):
        other.work(["docs"], exit_idle=True, poll=0.05)
        raise KeyboardInterrupt

    monkeypatch.setattr(Coordinator, "_wait", a_worker_stores_everything_then_ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            kb.ingest([str(corpus)], "docs", workers=0)
    finally:
        other.close()
    (run,) = kb.runs("docs")
    assert run["status"] == "interrupted"
    assert run["counts"]["documents"]["new"] == FILES and run["counts"]["chunks"]["embedded"] > 0, run["counts"]


def test_no_more_local_workers_start_than_the_run_has_items(kb, tmp_path, monkeypatch):
    """``kbctl ingest FOLDER --workers N`` started N processes whatever the run held: ``--workers
    1000`` for 5 files started a thousand ``kbctl worker`` processes (a load average past 200 on
    two cores, and two or three connections each against the server's limit), 995 of them with
    nothing to claim. It starts at most one a queued item."""
    import kbctl.api.ingest as api_ingest

    started: list[list[str]] = []
    real = subprocess.Popen

    def counted(argv, *args, **kwargs):
        if "worker" in argv:  # not the embedded server's own commands
            started.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(api_ingest.subprocess, "Popen", counted)
    folder = tmp_path / "two"
    folder.mkdir()
    for i in range(2):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nThe zorblat{i} setting.\n")
    report = kb.ingest([str(folder)], "few", workers=6, lease=5, verify=False)
    assert report.documents["new"] == 2, report.to_json()
    assert len(started) == 2, started
    report = kb.ingest([str(folder)], "few", workers=6, lease=5, verify=False)
    assert report.documents["unchanged"] == 2 and len(started) == 4


def test_the_servers_free_connections_are_counted_as_the_server_counts_them(kb):
    from kbctl.store.admin import free_connections

    conn = kb.connection()
    free, limit = free_connections(conn)
    assert limit == int(conn.execute("SHOW max_connections").fetchone()[0])
    reserved = int(conn.execute("SHOW superuser_reserved_connections").fetchone()[0])
    assert 0 < free <= limit - reserved - 1  # this session is one of those open
    other = kb.db.connect()  # one more session: one fewer free
    try:
        assert free_connections(conn)[0] == free - 1
    finally:
        other.close()


def test_no_more_local_workers_start_than_the_servers_free_connections_hold(kb, tmp_path, monkeypatch, caplog):
    """``--workers N`` past what the server's ``max_connections`` leaves: the workers beyond it
    failed to connect. As many start as fit (a worker opens up to three), with one warning."""
    import logging

    import kbctl.api.ingest as api_ingest
    import kbctl.store.admin as admin

    started = _worker_starts(monkeypatch)
    free = api_ingest.SPARE_CONNECTIONS + 2 * api_ingest.WORKER_CONNECTIONS + 1  # room for two
    monkeypatch.setattr(admin, "free_connections", lambda conn: (free, 100))
    folder = tmp_path / "six"
    folder.mkdir()
    for i in range(6):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nThe quillet{i} setting.\n")
    with caplog.at_level(logging.WARNING, logger="kbctl"):
        report = kb.ingest([str(folder)], "room", workers=5, lease=5, verify=False)
    assert report.documents["new"] == 6, report.to_json()
    assert len(started) == 2, started
    assert any("starting 2 of the 5 workers asked" in r.getMessage() for r in caplog.records), caplog.text


def test_workers_with_no_free_connection_are_refused_before_the_run_and_make_nothing(kb, tmp_path, monkeypatch):
    import kbctl.store.admin as admin
    from kbctl.errors import UsageError

    monkeypatch.setattr(admin, "free_connections", lambda conn: (2, 100))
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "n.md").write_text("# Note\n\nThe quillet setting.\n")
    with pytest.raises(UsageError, match="no room for a local worker"):
        kb.ingest([str(folder)], "full", workers=2, lease=5, verify=False)
    assert "full" not in [n["name"] for n in kb.namespaces()]
    assert kb.runs() == [] or all(r["namespace"] != "full" for r in kb.runs())


def test_no_more_local_workers_start_than_the_machines_available_memory_holds(kb, tmp_path, monkeypatch, caplog):
    """``--workers 64`` on a small machine: each worker loads the model, so the machine swapped or
    the OOM killer took workers. As many start as its available memory holds, with one warning."""
    import logging

    import kbctl.api.ingest as api_ingest
    from kbctl import machine

    started = _worker_starts(monkeypatch)
    need = api_ingest.worker_memory(kb.settings.profile("hash-384"))
    monkeypatch.setattr(machine, "available_memory", lambda: need + need // 2)  # room for one
    monkeypatch.setattr(machine, "cpu_count", lambda: 64)
    folder = tmp_path / "three"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nThe wimble{i} setting.\n")
    with caplog.at_level(logging.WARNING, logger="kbctl"):
        report = kb.ingest([str(folder)], "mem", profile="hash-384", workers=64, lease=5, verify=False)
    assert report.documents["new"] == 3, report.to_json()
    assert len(started) == 1, started
    said = [r.getMessage() for r in caplog.records if "workers asked" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("starting 1 of the 3 workers asked: this machine has"), said


def test_workers_with_no_room_in_memory_are_refused_before_the_run_and_make_nothing(kb, tmp_path, monkeypatch):
    from kbctl import machine
    from kbctl.errors import UsageError

    monkeypatch.setattr(machine, "available_memory", lambda: 10 << 20)
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "n.md").write_text("# Note\n\nThe wimble setting.\n")
    with pytest.raises(UsageError, match="10 MB of memory available: no room for a local worker") as e:
        kb.ingest([str(folder)], "small", profile="hash-384", workers=2, lease=5, verify=False)
    assert e.value.hint and "--workers 0" in e.value.hint
    assert "small" not in [n["name"] for n in kb.namespaces()]
    assert all(r["namespace"] != "small" for r in kb.runs())


def test_a_refused_workers_option_leaves_no_namespace_made_for_the_run(kb, tmp_path):
    from kbctl.errors import UsageError

    with pytest.raises(UsageError, match="stdin cannot be shared"):
        kb.ingest(["-"], "stdin_ns", workers=2, lease=5, verify=False)
    assert "stdin_ns" not in [n["name"] for n in kb.namespaces()]


def _worker_starts(monkeypatch) -> list[list[str]]:
    """The argv of each ``kbctl worker`` process an ingest starts (the processes still start)."""
    import kbctl.api.ingest as api_ingest

    started: list[list[str]] = []
    real = subprocess.Popen

    def counted(argv, *args, **kwargs):
        if "worker" in argv:
            started.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(api_ingest.subprocess, "Popen", counted)
    return started
