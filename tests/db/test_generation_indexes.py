"""A generation's HNSW index goes and comes without stopping the other namespaces.

Every namespace's vectors live in one table, ``kbctl.vectors``, with one partial HNSW index per
generation. A plain ``DROP INDEX`` of one of them takes ACCESS EXCLUSIVE on that table: behind a
long query on vectors it waits, and every search and ingest of every tenant queues behind it. A
generation's index is dropped ``CONCURRENTLY`` (after a swap, ``--drop-old``/``--drop-shadow``, a
rebind, a namespace's deletion), which locks the table SHARE UPDATE EXCLUSIVE: reads and writes go on.

An index being built ``CONCURRENTLY`` is invalid until its build is done, like one a failed build
left: a second ``ensure_index`` (two ``kbctl reembed``/swap at once) must wait for the build in
progress, not drop it; an invalid index with no builder is still dropped and built again.

No sleeps decide anything here: each test waits on what the server shows (``pg_locks``,
``pg_stat_activity``) and a reader that would queue has a ``lock_timeout``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import psycopg
import pytest

import kbctl
from kbctl.store import generations as gstore
from kbctl.store.generations import (
    create_generation,
    create_hnsw_index,
    delete_generation,
    drop_generation_indexes,
    ensure_index,
    generations,
    hnsw_index_name,
)


class _Background(threading.Thread):
    """Run ``fn`` in a thread; its result or exception is kept for ``outcome``."""

    def __init__(self, fn: Callable[[], Any]):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # handed to the test by outcome()
            self.error = e

    def outcome(self, timeout: float = 120.0) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the background call did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def _until(cond: Callable[[], bool], what: str, *, timeout: float = 60.0, unless: Callable[[], bool] | None = None):
    """Poll until ``cond()``; fails on timeout, or at once when ``unless()`` says it never will."""
    deadline = time.monotonic() + timeout
    while not cond():
        if unless is not None and unless():
            raise AssertionError(f"{what}: never happened")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.02)


def _owner(kb: kbctl.KnowledgeBase) -> psycopg.Connection:
    """A connection of kbctl's login (the tables' owner), autocommit, as the code's connections are."""
    return psycopg.connect(kb.db.dsn(), autocommit=True)


def _waiting(watch: psycopg.Connection, pid: int) -> bool:
    """Whether backend ``pid`` waits for a lock (of any kind)."""
    row = watch.execute("SELECT EXISTS (SELECT FROM pg_locks WHERE pid = %s AND NOT granted)", (pid,)).fetchone()
    return bool(row[0])


def _last_statement(watch: psycopg.Connection, pid: int) -> str:
    """The statement backend ``pid`` runs, or ran last."""
    row = watch.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return str(row[0]) if row else ""


def _index(conn, gid: int) -> tuple[int, bool] | None:
    """(oid, valid) of a generation's HNSW index, or None when there is none."""
    row = conn.execute(
        "SELECT i.indexrelid::int, i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        (f"kbctl.{hnsw_index_name(gid)}",),
    ).fetchone()
    return (int(row[0]), bool(row[1])) if row else None


def _namespace_with_vectors(kb: kbctl.KnowledgeBase, tmp_path, name: str):
    (tmp_path / name).mkdir()
    for i in range(3):
        (tmp_path / name / f"d{i}.md").write_text(f"# Doc {i}\n\nSomething about topic {i} to index.\n")
    kb.ingest([str(tmp_path / name)], name, verify=False)
    return kb.namespace(name), kb.profile_for(name)


def _failed_build(kb: kbctl.KnowledgeBase, gen, prof) -> int:
    """Leave the generation's index invalid as a ``CREATE INDEX CONCURRENTLY`` that failed does: the
    build waits for a writer's open transaction on vectors and is cancelled there. Its oid."""
    with _owner(kb) as writer, _owner(kb) as builder, _owner(kb) as watch:
        writer.execute("BEGIN")
        writer.execute("LOCK TABLE kbctl.vectors IN ROW EXCLUSIVE MODE")  # what an ingest's write holds
        pid = builder.info.backend_pid
        build = _Background(lambda: create_hnsw_index(builder, gen.id, prof, gen.storage, concurrently=True))
        build.start()
        try:
            _until(lambda: _waiting(watch, pid), "the build waits for the writer", unless=lambda: not build.is_alive())
            watch.execute("SELECT pg_cancel_backend(%s)", (pid,))
            with pytest.raises(psycopg.errors.QueryCanceled):
                build.outcome()
        finally:
            writer.execute("ROLLBACK")
            build.join(60)
        left = _index(watch, gen.id)
    assert left is not None and left[1] is False, left
    return left[0]


def test_dropping_a_generations_index_leaves_reads_and_writes_of_vectors_going(kb: kbctl.KnowledgeBase, tmp_path):
    """While a generation's index is being dropped behind a long query on ``kbctl.vectors``, another
    session still reads and writes vectors (a plain DROP INDEX queued ACCESS EXCLUSIVE on the
    table, and the read then queued behind it: every tenant's searches stopped)."""
    ns, prof = _namespace_with_vectors(kb, tmp_path, "dropper")
    conn = kb.connection()
    gid = create_generation(conn, ns.id, ns.profile_id, prof, "halfvec", "shadow")
    assert _index(conn, gid) is not None
    with conn.transaction():
        delete_generation(conn, ns.id, gid)
    with _owner(kb) as long_query, _owner(kb) as dropping, _owner(kb) as other, _owner(kb) as watch:
        long_query.execute("BEGIN")
        long_query.execute("SELECT count(*) FROM kbctl.vectors")  # ACCESS SHARE until it ends
        pid = dropping.info.backend_pid
        drop = _Background(lambda: drop_generation_indexes(dropping, [gid]))
        drop.start()
        try:
            _until(
                lambda: _waiting(watch, pid), "the drop waits for the long query", unless=lambda: not drop.is_alive()
            )
            other.execute("SET lock_timeout = '5s'")  # queued behind the drop, this would fail
            read = other.execute("SELECT count(*) FROM kbctl.vectors WHERE namespace_id = %s", (ns.id,))
            # it answered (not queued behind the drop); the count itself may be 0: a login that is not a
            # superuser (make test-dsn) is held to the tenants' rows by FORCE ROW LEVEL SECURITY
            assert read.fetchone() is not None
            with other.transaction():
                other.execute("LOCK TABLE kbctl.vectors IN ROW EXCLUSIVE MODE")  # an ingest's write
            modes = {
                r[0]
                for r in watch.execute(
                    "SELECT mode FROM pg_locks WHERE pid = %s AND locktype = 'relation'"
                    " AND relation = 'kbctl.vectors'::regclass",
                    (pid,),
                )
            }
            assert modes == {"ShareUpdateExclusiveLock"}, modes
        finally:
            long_query.execute("ROLLBACK")
        drop.outcome()
        assert _index(watch, gid) is None


def test_a_drop_inside_a_transaction_still_drops_the_index(kb: kbctl.KnowledgeBase, tmp_path):
    """CONCURRENTLY cannot run in a transaction: there the drop is a plain one, gone at commit."""
    ns, prof = _namespace_with_vectors(kb, tmp_path, "intx")
    conn = kb.connection()
    gid = create_generation(conn, ns.id, ns.profile_id, prof, "halfvec", "shadow")
    with conn.transaction():
        delete_generation(conn, ns.id, gid)
        drop_generation_indexes(conn, [gid])
    assert _index(conn, gid) is None


def test_ensure_index_waits_for_a_build_in_progress_and_does_not_drop_it(kb: kbctl.KnowledgeBase, tmp_path):
    """An index being built by another session is invalid until done: a second ``ensure_index``
    (a swap while ``kbctl reembed`` builds) waits for that build and keeps its index, where it
    dropped it as if a build had failed."""
    ns, prof = _namespace_with_vectors(kb, tmp_path, "inprogress")
    conn = kb.connection()
    gid = create_generation(conn, ns.id, ns.profile_id, prof, "halfvec", "shadow", index=False)
    gen = next(g for g in generations(conn, ns.id) if g.id == gid)
    first = _failed_build(kb, gen, prof)  # the invalid index a build in progress shows
    with _owner(kb) as builder, _owner(kb) as second, _owner(kb) as watch:
        builder.execute("SELECT pg_advisory_lock(%s, %s)", (gstore.INDEX_CLASS, gid))  # building
        pid = second.info.backend_pid
        call = _Background(lambda: ensure_index(second, gen, prof))
        call.start()
        try:
            _until(
                lambda: "pg_try_advisory_lock" in _last_statement(watch, pid),
                "the second ensure_index waits for the build in progress",
                unless=lambda: not call.is_alive(),
            )
            assert _index(watch, gid) == (first, False)  # not dropped
            # the builder finishes its build (as ensure_index would: the failed one's index goes)
            builder.execute(f"DROP INDEX CONCURRENTLY kbctl.{hnsw_index_name(gid)}")
            create_hnsw_index(builder, gid, prof, gen.storage, concurrently=True)
            built = _index(watch, gid)
            assert built is not None and built[1] is True
        finally:
            builder.execute("SELECT pg_advisory_unlock(%s, %s)", (gstore.INDEX_CLASS, gid))
        assert call.outcome() is False  # the other session built it
        assert _index(watch, gid) == built


def test_ensure_index_drops_and_rebuilds_an_index_a_failed_build_left(kb: kbctl.KnowledgeBase, tmp_path):
    """An invalid index with no build holding it is what a failed build left: it is dropped and
    built again, valid."""
    ns, prof = _namespace_with_vectors(kb, tmp_path, "failed")
    conn = kb.connection()
    gid = create_generation(conn, ns.id, ns.profile_id, prof, "halfvec", "shadow", index=False)
    gen = next(g for g in generations(conn, ns.id) if g.id == gid)
    first = _failed_build(kb, gen, prof)
    assert ensure_index(conn, gen, prof) is True
    after = _index(conn, gid)
    assert after is not None and after[1] is True and after[0] != first
    assert ensure_index(conn, gen, prof) is False  # valid now: nothing to do
