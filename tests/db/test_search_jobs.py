"""A search never leaves a worker-thread job of its own running on the session's side connections.

The dense lane of a hybrid search runs on a worker thread, on the "dense" side connection, while
the lexical lane runs on the main one. When the lexical lane failed, the search left at once and the
dense job went on: a search retried after a serialization failure (``read_retried``) ran a second
dense job on the same connection beside the first, and ``kbctl serve`` handed the session to the
next request while a cancelled request's job still ran on it (CI, 2026-11-26: "transaction commit
at the wrong nesting level" in ``dense_rows``).
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from kbctl.errors import KbctlError
from tests.db.test_prf import MANY
from tests.db.test_store import _write


class _SlowDense:
    """Wraps the engine's ``_dense_scan``: each call takes ``delay`` s; records overlaps and ends."""

    def __init__(self, real, delay: float) -> None:
        self.real, self.delay = real, delay
        self.running = self.most = 0
        self.started: list[float] = []
        self.finished: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(time.monotonic())
        try:
            time.sleep(self.delay)
            return self.real(*args, **kwargs)
        finally:
            with self.lock:
                self.running -= 1
                self.finished.append(time.monotonic())


def test_a_failing_search_waits_for_its_dense_job(kb, monkeypatch):
    from kbctl.search import engine

    _write(kb, "jobs_fail", MANY)
    slow = _SlowDense(engine._dense_scan, 0.5)
    monkeypatch.setattr(engine, "_dense_scan", slow)

    def broken(conn, plan, run):
        raise psycopg.errors.QueryCanceled("canceling statement due to user request")

    monkeypatch.setattr(engine, "_lexical", broken)
    with pytest.raises(KbctlError):
        kb.search("refund payment bank", "jobs_fail", mode="hybrid")
    returned = time.monotonic()
    assert slow.running == 0, "the search returned while its dense job still ran"
    time.sleep(0.7)  # a job left behind would start, or end, by now
    # the job ran to its end before the search raised, or was cancelled before it started
    assert len(slow.started) == len(slow.finished) and all(t <= returned for t in slow.started + slow.finished)


def test_a_search_retried_after_a_serialization_failure_never_runs_two_dense_jobs_at_once(kb, monkeypatch):
    from kbctl.search import engine

    _write(kb, "jobs_retry", MANY)
    slow = _SlowDense(engine._dense_scan, 0.3)
    monkeypatch.setattr(engine, "_dense_scan", slow)
    real_lexical, failures = engine._lexical, [1]

    def once(conn, plan, run):
        if failures:
            failures.pop()
            raise psycopg.errors.SerializationFailure("could not serialize access")
        return real_lexical(conn, plan, run)

    monkeypatch.setattr(engine, "_lexical", once)
    r = kb.search("refund payment bank", "jobs_retry", mode="hybrid")
    assert not failures, "the first attempt failed, and the search ran again"
    # the first attempt's job was cancelled before it started, or waited for: never two at once
    assert r.hits and 1 <= len(slow.finished) <= 2
    assert slow.most == 1, "the retried search's dense job ran beside the first one, on the same connection"
