"""The module-level verbs (``kbctl.search``, ``kbctl.ingest``, ``kbctl.retriever``) share one default
knowledge base, made on first use."""

from __future__ import annotations

import threading
import time

import kbctl


def test_threads_first_calling_the_module_verbs_at_once_share_one_default_handle(monkeypatch):
    """Two threads' first calls each made a default handle (no lock around it): two sets of
    connections, one of them never closed. They get one."""
    made: list[object] = []

    def slow_open(**kwargs):
        time.sleep(0.05)  # the window in which another thread's first call also finds none
        made.append(object())
        return made[-1]

    monkeypatch.setattr(kbctl, "_default", None)
    monkeypatch.setattr(kbctl, "open", slow_open)
    barrier = threading.Barrier(6)
    got: list[object] = []

    def first_call():
        barrier.wait(timeout=10)
        got.append(kbctl._kb())

    threads = [threading.Thread(target=first_call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(made) == 1 and got == made * 6, (len(made), len(got))
