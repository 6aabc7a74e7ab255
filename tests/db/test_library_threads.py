"""One ``kbctl.open()`` handle shared by an application's threads (an agent backend serving many
users): searches of every mode at once, an ingest meanwhile, retrievers of several namespaces;
each thread's answer is the one the same search gives alone, no connection is left behind, and a
process forked after the handle was used searches on its own connections."""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.conftest import write_folder

BILLING = {
    "refunds.md": "---\ntopic: money\n---\n# Refunds\n\nRefunds take five business days and go back to the original payment method.\n",
    "invoices.md": "# Invoices\n\nAn invoice is sent on the first day of the billing cycle.\n",
    "plans.md": "# Plans\n\nChange your plan at any time; the billing cycle stays the same.\n",
}
TECH = {
    "gateway.md": "# Gateway errors\n\nA 502 gateway error means the upstream did not answer in time.\n",
    "password.md": "# Passwords\n\nReset your password from the sign-in page; the link expires in one hour.\n",
    "refund-api.md": "---\ntopic: money\n---\n# Refund API\n\nThe refund endpoint returns the refund id and its state.\n",
}
QUERIES = [
    ("how long do refunds take", {}),
    ("refund", {"mode": "lexical"}),
    ("gateway error upstream", {"mode": "dense"}),
    ("billing cycle", {"mode": "hybrid", "k": 2}),
    ("refund", {"filters": ["topic=money"]}),
]


def _key(result):
    return [(h.namespace, h.chunk_id, round(h.score, 9)) for h in result.hits]


def _client_backends(kb) -> int:
    """Client connections open on the server now, this count's own excepted."""
    with psycopg.connect(kb.db.dsn(), autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'").fetchone()
        return row[0] - 1


@pytest.fixture
def two_namespaces(kb, tmp_path):
    kb.ingest([write_folder(tmp_path, "billing", BILLING)], "billing", verify=False)
    kb.ingest([write_folder(tmp_path, "tech", TECH)], "tech", verify=False)
    return kb


def test_threads_sharing_one_handle_get_the_answers_each_search_gives_alone(two_namespaces, tmp_path):
    kb = two_namespaces
    alone = {(ns, q, i): _key(kb.search(q, ns, **o)) for ns in ("billing", "tech") for i, (q, o) in enumerate(QUERIES)}
    assert all(alone.values())  # every search finds something: a wrong answer cannot hide as none
    before = _client_backends(kb)
    jobs = [(ns, i) for _ in range(6) for ns in ("billing", "tech") for i in range(len(QUERIES))]
    failures: list[str] = []
    barrier = threading.Barrier(9)

    def one(job):
        ns, i = job
        q, o = QUERIES[i]
        try:
            got = _key(kb.search(q, ns, **o))
        except Exception as e:  # every failure is the finding
            failures.append(f"{ns} {q!r} {o}: {type(e).__name__}: {e}")
            return
        if got != alone[(ns, q, i)]:
            failures.append(f"{ns} {q!r} {o}: {got} != {alone[(ns, q, i)]}")

    def ingesting():
        barrier.wait(timeout=30)
        for n in range(3):  # the same handle writes meanwhile: another namespace, then the searched one's neighbour
            folder = write_folder(tmp_path, f"notes{n}", {f"n{n}.md": f"# Note {n}\n\nA refund note, number {n}.\n"})
            try:
                kb.ingest([folder], "notes", verify=False)
            except Exception as e:
                failures.append(f"ingest: {type(e).__name__}: {e}")

    def searching(chunk):
        barrier.wait(timeout=30)
        for job in chunk:
            one(job)

    threads = [threading.Thread(target=searching, args=(jobs[n::8],)) for n in range(8)]
    threads.append(threading.Thread(target=ingesting))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not [t for t in threads if t.is_alive()], "a thread never finished (deadlock)"
    assert failures == []
    assert kb.search("refund note", "notes", mode="lexical").hits  # the ingest landed
    assert _client_backends(kb) <= before + 9 * 3  # each thread's own connections at most
    pids = {c.info.backend_pid for c in kb.session.open_connections()}
    assert pids  # the threads' connections, as the handle holds them
    kb.close()
    assert kb.session.open_connections() == [] and _backends_gone(kb, pids)


def _backends_gone(kb, pids: set[int], wait: float = 10.0) -> bool:
    """Whether the server processes of these connections have ended: a backend exits after its client
    closed the connection, not with it (under load, a look at once still sees some). Only these are
    counted: other tests of the worker may keep connections of their own to the same server."""
    deadline = time.monotonic() + wait
    while True:
        with psycopg.connect(kb.db.dsn(), autocommit=True) as c:
            left = c.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)).fetchone()[0]
        if left == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_retrievers_of_several_namespaces_in_parallel_never_cross(two_namespaces):
    kb = two_namespaces
    retrievers = {ns: kb.retriever(ns, k=3) for ns in ("billing", "tech")}
    alone = {ns: _key(r("refund")) for ns, r in retrievers.items()}

    def ask(ns):
        return ns, _key(retrievers[ns]("refund"))

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, ["billing", "tech"] * 20, timeout=120))
    assert all(got == alone[ns] and {h[0] for h in got} == {ns} for ns, got in answers)


def test_the_connections_of_threads_that_ended_are_closed(two_namespaces):
    kb = two_namespaces
    kb.search("refund", "billing")
    for _ in range(6):  # a thread per request, as a simple server makes them
        t = threading.Thread(target=kb.search, args=("refund", "billing"))
        t.start()
        t.join(timeout=60)
    kb.search("refund", "tech")
    # the main thread's and the last request's; those of the threads that ended before were closed
    assert len(kb.session.open_connections()) <= 2 * 3


def _search_in_child(kb, out):
    try:
        out.put(("ok", _key(kb.search("refund", "billing"))))
    except BaseException as e:
        out.put(("error", f"{type(e).__name__}: {e}"))


def test_a_process_forked_after_the_handle_searched_searches_on_its_own(two_namespaces):
    kb = two_namespaces
    alone = _key(kb.search("refund", "billing"))  # the handle's connections and the search pool exist
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_search_in_child, args=(kb, out))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked process hung on the handle it inherited")
    assert out.get(timeout=10) == ("ok", alone)
    assert _key(kb.search("refund", "billing")) == alone  # the parent's connections are whole


def test_a_pooled_knowledge_base_lent_to_threads_in_turn_keeps_one_set_of_connections(kb_home, tenant, two_namespaces):
    from kbctl.config import load_settings
    from kbctl.server.service import Service

    settings = load_settings(overrides={"database.home": str(kb_home), "defaults.tenant": tenant})
    service = Service(settings.with_overrides({"server.workers": 1}))

    answers: list = []
    finish = threading.Event()

    def request(turn, done):
        turn.wait(timeout=60)
        with service.kb() as pooled:
            answers.append((pooled, _key(pooled.search("refund", "billing"))))
        done.set()
        finish.wait(timeout=60)  # alive meanwhile, as a server's worker threads are

    turns = [(threading.Event(), threading.Event()) for _ in range(6)]
    threads = [threading.Thread(target=request, args=t) for t in turns]
    for t in threads:
        t.start()
    for turn, done in turns:  # one request at a time, each on another thread
        turn.set()
        assert done.wait(timeout=60)
    pooled = answers[0][0]
    try:
        assert all(a[0] is pooled and a[1] == answers[0][1] for a in answers) and len(answers) == 6
        assert len(pooled.session.threads) == 1 and len(pooled.session.open_connections()) <= 3
    finally:
        finish.set()
        for t in threads:
            t.join(timeout=60)
        pooled.close()


_FIRST_USE = """
import sys, threading
from concurrent.futures import ThreadPoolExecutor
import kbctl

kb = kbctl.open(home=sys.argv[1], tenant=sys.argv[2], profile="hash-384")  # nothing resolved yet
barrier = threading.Barrier(8)

def first():
    barrier.wait(timeout=30)
    try:
        return [(h.namespace, h.chunk_id) for h in kb.search("refund", "billing").hits]
    except Exception as e:
        return f"{type(e).__name__}: {e}"

with ThreadPoolExecutor(max_workers=8) as pool:
    print(repr([f.result(timeout=120) for f in [pool.submit(first) for _ in range(8)]]))
kb.close()
"""


def test_a_new_process_whose_threads_first_use_one_handle_at_once_starts_one_server(kb_home, tenant, two_namespaces):
    import ast
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    alone = [(h.namespace, h.chunk_id) for h in two_namespaces.search("refund", "billing").hits]
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", _FIRST_USE, str(kb_home), tenant], capture_output=True, env=env, timeout=300
    )
    assert p.returncode == 0, p.stderr.decode()
    assert ast.literal_eval(p.stdout.decode().strip()) == [alone] * 8


# -- close() while other threads are inside a verb; more threads than the handle serves at once -----


def _held_search(monkeypatch, inside: threading.Event, release: threading.Event):
    """Searches of this process wait inside the verb, connected, until ``release`` (``inside`` says one does)."""
    import kbctl.api.search as api_search

    run = api_search.run_search

    def held(conn, *args, **kwargs):
        inside.set()
        assert release.wait(timeout=60), "never released"
        return run(conn, *args, **kwargs)

    monkeypatch.setattr(api_search, "run_search", held)


def test_close_waits_for_a_verb_under_way_and_refuses_new_ones(two_namespaces, monkeypatch):
    import kbctl.errors as E

    kb = two_namespaces
    alone = _key(kb.search("refund", "billing"))
    inside, release = threading.Event(), threading.Event()
    _held_search(monkeypatch, inside, release)
    answers: list = []

    def searching():
        try:
            answers.append(_key(kb.search("refund", "billing")))
        except Exception as e:
            answers.append(e)

    searcher = threading.Thread(target=searching)
    searcher.start()
    try:
        assert inside.wait(timeout=60)
        pids = {c.info.backend_pid for c in kb.session.open_connections()}
        closer = threading.Thread(target=kb.close, kwargs={"timeout": 60})
        closer.start()
        deadline = time.monotonic() + 30
        while not getattr(kb.session, "closing", False) and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(E.KnowledgeBaseClosed) as refused:  # no new verb once close() began
            kb.search("refund", "billing")
        assert refused.value.hint and "kbctl.open()" in refused.value.hint
        assert closer.is_alive()  # still waiting for the search under way, its connections open
        assert {c.info.backend_pid for c in kb.session.open_connections()} == pids
    finally:
        release.set()
    searcher.join(timeout=60)
    closer.join(timeout=60)
    assert not closer.is_alive() and answers == [alone]  # the search ended as it would have
    assert kb.session.open_connections() == [] and _backends_gone(kb, pids)
    with pytest.raises(E.KnowledgeBaseClosed):  # a closed handle stays closed: it opens nothing again
        kb.namespaces()
    kb.close()  # twice is fine


_CLOSE_UNDER_A_STATEMENT = """
import sys, threading
import kbctl
import kbctl.api.search as api_search
from kbctl.errors import KnowledgeBaseClosed

kb = kbctl.open(home=sys.argv[1], tenant=sys.argv[2], profile="hash-384")
kb.search("refund", "billing")
run, inside = api_search.run_search, threading.Event()

def slow(conn, *args, **kwargs):
    inside.set()
    conn.execute("SELECT pg_sleep(60)")  # a long statement under way when close() is called
    return run(conn, *args, **kwargs)

api_search.run_search = slow
out = []

def searching():
    try:
        out.append(kb.search("refund", "billing"))
    except BaseException as e:
        out.append(e)

t = threading.Thread(target=searching)
t.start()
assert inside.wait(60)
kb.close(timeout=0.2)
t.join(60)
e = out[0]
print(type(e).__name__, "|", e, "|", getattr(e, "hint", None), "|", type(e.__cause__).__name__)
print("open", len(kb.session.open_connections()), "alive", t.is_alive())
"""


def test_close_cancels_a_statement_still_running_after_its_wait_and_the_verb_says_why(kb_home, tenant, two_namespaces):
    """In a process of its own: closing a connection under a running statement has crashed libpq."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-c", _CLOSE_UNDER_A_STATEMENT, str(kb_home), tenant],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr.decode()
    said, left = p.stdout.decode().strip().splitlines()
    kind, message, hint, cause = said.split(" | ")
    assert kind == "KnowledgeBaseClosed" and "closed" in message and "kbctl.open()" in hint
    assert cause != "NoneType"  # what the close cut short stays visible, for debugging
    assert left == "open 0 alive False"


def _open_limited(kb_home, tenant, tmp_path, threads: int, wait: int):
    import kbctl

    cfg = tmp_path / "limited.toml"
    cfg.write_text(f"[database]\nhandle_threads = {threads}\nconnect_timeout = {wait}\n")
    return kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384")


def test_a_handle_serves_at_most_its_limit_of_threads_at_once_and_the_others_wait(
    kb_home, tenant, two_namespaces, tmp_path, monkeypatch
):
    alone = _key(two_namespaces.search("refund gateway", "billing", mode="hybrid"))
    kb = _open_limited(kb_home, tenant, tmp_path, threads=2, wait=120)
    import kbctl.api.search as api_search

    run, seen = api_search.run_search, []

    def counted(conn, *args, **kwargs):
        seen.append((len(kb.session.threads), len(kb.session.open_connections())))
        time.sleep(0.05)  # inside the verb a while: the threads overlap
        return run(conn, *args, **kwargs)

    monkeypatch.setattr(api_search, "run_search", counted)
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(lambda _: _key(kb.search("refund gateway", "billing", mode="hybrid")), range(18)))
        assert answers == [alone] * 18  # every thread was served, none failed
        assert len(seen) == 18 and max(s[0] for s in seen) <= 2 and max(s[1] for s in seen) <= 2 * 3
        assert len(kb.session.threads) <= 2 and len(kb.session.open_connections()) <= 2 * 3
    finally:
        kb.close()


def test_a_thread_that_waits_too_long_for_a_free_set_of_connections_is_told_what_to_raise(
    kb_home, tenant, two_namespaces, tmp_path, monkeypatch
):
    import kbctl.errors as E

    kb = _open_limited(kb_home, tenant, tmp_path, threads=1, wait=1)
    inside, release = threading.Event(), threading.Event()
    _held_search(monkeypatch, inside, release)
    holder = threading.Thread(target=kb.search, args=("refund", "billing"))
    holder.start()
    try:
        assert inside.wait(timeout=60)
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(_caught(lambda: kb.namespaces())))
        waiter.start()
        waiter.join(timeout=60)
        assert len(got) == 1 and isinstance(got[0], E.DatabaseError), got
        assert "handle_threads" in str(got[0]) and "handle_threads" in (got[0].hint or "")
    finally:
        release.set()
        holder.join(timeout=60)
        kb.close()


def _caught(call):
    try:
        return call()
    except Exception as e:
        return e


def test_an_ingest_cut_by_close_ends_its_run_interrupted_and_the_next_one_resumes(
    kb_home, tenant, tmp_path, monkeypatch
):
    """``kb.close()`` from another thread cancels an ingest's statement after its wait: the run was
    closed ``failed``, as if the ingest had failed; like Ctrl-C, it is ``interrupted`` now, its
    counts saying why (the handle was closed), and the next ingest (another handle) stores it all."""
    import kbctl
    import kbctl.errors as E
    from kbctl.ingest import pipeline

    folder = write_folder(tmp_path, "billing", BILLING)
    kb = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384")
    kb.create_namespace("cut", "hash-384")
    real, inside = pipeline.consume, threading.Event()

    def slow(conn, *args, **kwargs):
        inside.set()
        conn.execute("SELECT pg_sleep(60)")  # a statement under way when close() is called
        return real(conn, *args, **kwargs)

    monkeypatch.setattr(pipeline, "consume", slow)
    out: list = []

    def ingesting():
        try:
            out.append(kb.ingest([folder], "cut", verify=False))
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=ingesting)
    t.start()
    assert inside.wait(timeout=60)
    kb.close(timeout=0.2)
    t.join(timeout=60)
    assert not t.is_alive() and isinstance(out[0], E.KnowledgeBaseClosed), out
    monkeypatch.undo()
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as again:
        (run,) = again.runs("cut")
        assert run["status"] == "interrupted", run
        assert "was closed" in (run.get("counts") or {}).get("interrupted", ""), run
        done = again.ingest([folder], "cut", verify=False)
        assert done.documents["new"] == len(BILLING) and not done.errors
        assert [r["status"] for r in again.runs("cut")] == ["ok", "interrupted"]
