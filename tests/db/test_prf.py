"""Hybrid pseudo-relevance feedback, readable scores and the own-heading weight on the real store."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

from kbctl.errors import UsageError
from kbctl.store import search as store
from kbctl.types import Block, Document
from tests.db.test_store import DOCS, _doc, _write

# A dozen small documents whose vocabularies overlap, so that both lanes find several of them and
# each finds some the other does not.
TOPICS = [
    ("refunds", "A refund is paid back to the original payment method within ten business days."),
    ("chargebacks", "A chargeback reverses a card payment when the customer disputes it with the bank."),
    ("invoices", "Invoices list every payment due this month and are issued on the first day."),
    ("payouts", "Payouts move the balance to the merchant bank account every business day."),
    ("subscriptions", "A subscription renews each month and the card on file is charged automatically."),
    ("trials", "A free trial turns into a paid subscription unless it is cancelled before the end."),
    ("coupons", "Coupons lower the price of an order; a refund returns the amount actually paid."),
    ("taxes", "Sales tax is added to each invoice according to the billing address of the customer."),
    ("sso", "Configure SAML single sign-on from the admin console for every workspace."),
    ("passwords", "Reset a forgotten password from the sign-in page; the link expires after an hour."),
    ("exports", "Export the payment history as a CSV file from the billing page of the console."),
    ("disputes", "Answer a dispute with receipts and delivery proof before the bank's deadline."),
]
MANY = [_doc(f"mem://{name}", name.title(), [text]) for name, text in TOPICS]


def test_feedback_reads_the_stored_postings_and_vectors(kb):
    ns = _write(kb, "fb_store", DOCS)
    conn = kb.connection()
    key = tuple(
        conn.execute(
            "SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s ORDER BY id LIMIT 1", (ns.id,)
        ).fetchone()
    )
    postings = store.feedback_postings(conn, [key])
    assert postings and all((p[0], p[1]) == key and p[3] > 0 and p[4] >= p[3] for p in postings)
    vectors = store.feedback_vectors(conn, [key], [ns.generation_id])
    assert set(vectors) == {key} and vectors[key].shape == (ns.dimension,)
    assert np.linalg.norm(vectors[key]) == pytest.approx(1.0, abs=1e-3)


def test_hybrid_prf_runs_a_second_round_and_reports_it(kb):
    _write(kb, "fb_search", DOCS)
    plain = kb.search("refund payment", "fb_search", mode="hybrid", prf="off")
    fed = kb.search("refund payment", "fb_search", mode="hybrid", prf="hybrid")
    assert "prf" not in plain.details
    info = fed.details["prf"]
    assert info["docs"] >= 1 and info["vector_docs"] >= 1 and isinstance(info["terms"], list)
    assert "prf_ms" in fed.details["timings_ms"]
    assert fed.hits and set(fed.hits[0].lanes) == {"lexical", "dense"}
    # one lane alone never takes feedback
    assert "prf" not in kb.search("refund payment", "fb_search", mode="lexical", prf="hybrid").details
    with pytest.raises(UsageError, match="prf"):
        kb.search("refund payment", "fb_search", mode="hybrid", prf="rm3")


def test_relevance_is_between_0_and_1_and_raw_scores_stay(kb):
    _write(kb, "fb_rel", DOCS)
    for mode in ("hybrid", "lexical", "dense"):
        r = kb.search("refunds processed business days", "fb_rel", mode=mode)
        assert r.hits, mode
        assert all(h.relevance is not None and 0.0 <= h.relevance <= 1.0 for h in r.hits), mode
        assert [h.relevance for h in r.hits] == sorted((h.relevance for h in r.hits), reverse=True), mode
        assert r.hits[0].to_json()["score"] == r.hits[0].score


def test_a_section_headed_by_an_identifier_outranks_mentions_of_it(kb):
    title = "API error code reference"
    heading = (title, "4xx errors", "LMN-4012 — E_SCOPE_DENIED")
    blocks = [
        Block(
            "The key is valid, but it was created without the scope this endpoint needs. Create a new key with the "
            "additional scope, deploy it, and revoke the old key.",
            heading_path=heading,
        ),
        Block(
            "Before API v2 several errors shared LMN-4003; use LMN-4012 and LMN-4030 now.",
            heading_path=(title, "Deprecated codes"),
        ),
        Block(
            "Do not retry LMN-4000, LMN-4001, LMN-4010, LMN-4012 or LMN-4040.", heading_path=(title, "Handling errors")
        ),
    ]
    doc = Document.from_blocks("mem://errors", title, blocks, "markdown", {})
    _write(kb, "fb_heading", [doc])
    r = kb.search("LMN-4012", "fb_heading", mode="lexical", k=3)
    assert r.hits[0].metadata["heading_path"][-1] == "LMN-4012 — E_SCOPE_DENIED"


def test_a_feedback_search_reads_prf_candidates_per_lane(kb_home, tenant, tmp_path):
    """Both rounds of a search with feedback read ``prf_candidates`` per lane (the profile's, or the
    query's own ``candidates``); a search without feedback keeps ``candidates``."""
    import kbctl

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profiles.hash-384.search]\ncandidates = 20\nprf_candidates = 37\n")
    kb = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384", config=cfg)
    try:
        _write(kb, "fb_depth", DOCS)
        fed = kb.search("refund payment", "fb_depth", mode="hybrid", prf="hybrid")
        assert fed.details["prf"]["candidates"] == 37
        own = kb.search("refund payment", "fb_depth", mode="hybrid", prf="hybrid", candidates=12)
        assert own.details["prf"]["candidates"] == 12
        assert "prf" not in kb.search("refund payment", "fb_depth", mode="hybrid", prf="off").details
    finally:
        kb.close()


def test_prf_candidates_is_checked(tmp_path):
    from kbctl.config import load_settings
    from kbctl.errors import ConfigError

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profile.search]\nprf_candidates = 0\n")
    with pytest.raises(ConfigError, match=r"search.prf_candidates must be in 1..1000"):
        load_settings(cfg, env={}).profile("minilm")


def test_candidate_scores_equal_the_lanes_own(kb):
    """Rescoring reads the same numbers the lanes computed: BM25 of the lexical lane's chunks from
    their postings, and the dense lane's similarities from their stored vectors."""
    from kbctl.search.lanes import dense_lane, lexical_lane

    ns = _write(kb, "fb_exact", MANY)
    conn = kb.connection()
    prof = kb.settings.profile("hash-384")
    terms = {"refund": 1.0, "payment": 1.0, "bank": 1.0}
    lex = lexical_lane(conn, [ns], terms, 50, (), prof)
    assert len(lex) >= 2
    n, total = store.lexical_stats(conn, [ns.id])
    df = store.vocabulary_df(conn, [ns.id], list(terms))
    import math

    weights = [terms[t] * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms]
    keys = [(h.namespace_id, h.chunk_id) for h in lex]
    k1, b = prof.lexical.k1, prof.lexical.b
    again = store.candidate_bm25(conn, keys, list(terms), weights, k1=k1, b=b, avgdl=total / n)
    assert again == pytest.approx({(h.namespace_id, h.chunk_id): h.score for h in lex}, rel=1e-9)
    # a chunk without the terms is missing (score 0), and pairs outside the keys are never returned
    other = conn.execute(
        "SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s AND NOT (id = ANY(%s))",
        (ns.id, [k for _, k in keys]),
    ).fetchall()
    assert other
    assert (
        store.candidate_bm25(conn, [tuple(r) for r in other], list(terms), weights, k1=k1, b=b, avgdl=total / n) == {}
    )

    from kbctl.embed import get_embedder

    qvec = np.asarray(get_embedder(prof).embed_query("refund payment bank"), dtype=np.float32)
    dense, _ = dense_lane(conn, [ns], qvec, 50, (), prof)
    dist = store.candidate_distances(
        conn, [(h.namespace_id, h.chunk_id) for h in dense], qvec, prof.distance, [ns.generation_id]
    )
    assert {k: 1.0 - d for k, d in dist.items()} == pytest.approx(
        {(h.namespace_id, h.chunk_id): h.score for h in dense}, abs=1e-6
    )


def test_rescoring_feedback_scores_every_candidate_in_both_lanes(kb_home, tenant, tmp_path):
    """``prf = "rescore"``: no second search, each lane ranks the union of the first round's candidates,
    so a chunk only one lane found is scored by the other as well."""
    with _banded(kb_home, tenant, tmp_path, 0.0, 1.0) as kb:  # every query takes feedback
        _rescoring_checks(kb)


def _rescoring_checks(kb):
    _write(kb, "fb_rescore", MANY)
    q = "refund payment bank"
    plain = kb.search(q, "fb_rescore", mode="hybrid", prf="off", k=12)
    one_lane = [h for h in plain.hits if h.lanes["lexical"]["rank"] is None]
    assert one_lane, "the fixture must leave some hits to one lane"
    fed = kb.search(q, "fb_rescore", mode="hybrid", prf="rescore", k=12)
    info = fed.details["prf"]
    assert info["applied"] is True and info["docs"] >= 1 and 0.0 <= info["agreement"] <= 1.0
    assert info["candidates"] == len(plain.hits)
    # every hit now carries both lanes' evidence, and each lane ranks every candidate
    assert fed.hits and all(h.lanes[lane]["rank"] is not None for h in fed.hits for lane in ("lexical", "dense"))
    assert {h.lanes["lexical"]["rank"] for h in fed.hits} == set(range(1, len(fed.hits) + 1))
    assert "prf_ms" in fed.details["timings_ms"]


@contextmanager
def _banded(kb_home, tenant, tmp_path, lo: float, hi: float):
    """A KnowledgeBase whose profile takes feedback by rescoring within the agreement band [lo, hi]."""
    import kbctl

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(f'[profiles.hash-384.search]\nprf = "rescore"\nprf_min_agreement = {lo}\nprf_max_agreement = {hi}\n')
    kb = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384", config=cfg)
    try:
        yield kb
    finally:
        kb.close()


def _skipped_like_plain(kb, ns: str, q: str = "refund payment bank") -> dict:
    """The decision's details of a hybrid search that skipped feedback; its hits are plain hybrid's."""
    r = kb.search(q, ns, mode="hybrid")
    plain = kb.search(q, ns, mode="hybrid", prf="off")
    info = r.details["prf"]
    assert info["applied"] is False
    assert [(h.chunk_id, h.score) for h in r.hits] == [(h.chunk_id, h.score) for h in plain.hits]
    return info


def test_feedback_is_skipped_when_the_lanes_disagree(kb_home, tenant, tmp_path):
    """The per-query decision: below ``prf_min_agreement`` the first round is the answer (the same
    hits as without feedback), and the decision and its measure are in the details (--explain)."""
    with _banded(kb_home, tenant, tmp_path, 1.0, 1.0) as kb:
        # Random document vectors over many documents: the dense lane's first ten are unrelated to
        # the lexical lane's, so the lanes disagree.
        rng = np.random.default_rng(7)
        filler = [
            _doc(f"mem://note{i}", f"Note {i}", [f"Gardening note {i} about tomatoes and soil."]) for i in range(40)
        ]
        _write(kb, "fb_skip", MANY + filler, vectors=lambda n: rng.normal(size=(n, 384)))
        info = _skipped_like_plain(kb, "fb_skip")
        assert info["agreement"] < 1.0
        assert info == {"applied": False, "agreement": info["agreement"], "min_agreement": 1.0, "max_agreement": 1.0}
    with _banded(kb_home, tenant, tmp_path, 0.0, 1.0) as kb:
        assert kb.search("refund payment bank", "fb_skip", mode="hybrid").details["prf"]["applied"] is True


def test_feedback_is_skipped_when_the_lanes_already_agree(kb_home, tenant, tmp_path):
    """Above ``prf_max_agreement`` the first round is likely good already and is the answer: the
    same hits as without feedback, the decision in the details."""
    with _banded(kb_home, tenant, tmp_path, 0.0, 0.0) as kb:
        _write(kb, "fb_agree", MANY)  # the hash profile's vectors follow the words: the lanes agree
        info = _skipped_like_plain(kb, "fb_agree")
        assert info["agreement"] > 0.0
        assert info == {"applied": False, "agreement": info["agreement"], "min_agreement": 0.0, "max_agreement": 0.0}
    with _banded(kb_home, tenant, tmp_path, 0.0, 1.0) as kb:
        assert kb.search("refund payment bank", "fb_agree", mode="hybrid").details["prf"]["applied"] is True


def test_forward_index_scores_equal_the_statement_and_leave_the_tail(kb):
    """Packed chunks are rescored from the segment's forward index (migration 017) with the numbers
    the postings give; chunks written after the packing (the tail) are left to the statement, and a
    chunk holding none of the terms is missing in both."""
    import math

    from kbctl.search import forward
    from kbctl.store import lexical as packed

    ns = _write(kb, "fb_forward", MANY[:8])
    conn = kb.connection()
    packed.pack(conn, ns.id, tenant=ns.tenant)
    _write(kb, "fb_forward", MANY[8:])  # the tail: not packed
    forward.clear_cache()
    prof = kb.settings.profile("hash-384")
    terms = {"refund": 1.0, "payment": 1.0, "bank": 1.0, "password": 0.5, "nowhere": 1.0}
    n, total = store.lexical_stats(conn, [ns.id])
    df = store.vocabulary_df(conn, [ns.id], list(terms))
    present = [t for t in terms if t in df]
    weights = [terms[t] * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in present]
    keys = [
        tuple(r) for r in conn.execute("SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))
    ]
    k1, b = prof.lexical.k1, prof.lexical.b
    done, rest = forward.candidate_bm25(conn, keys, present, weights, k1=k1, b=b, avgdl=total / n)
    hi = max(s.hi for s in packed.segments(conn, [ns.id]))
    assert sorted(rest) == sorted(k for k in keys if k[1] > hi) and rest  # the tail, to the statement
    sql = store.candidate_bm25(conn, keys, present, weights, k1=k1, b=b, avgdl=total / n)
    assert done == pytest.approx({k: v for k, v in sql.items() if k[1] <= hi}, rel=1e-12)
    assert done and len(done) < sum(1 for k in keys if k[1] <= hi)  # some packed chunks hold none of the terms


def test_forward_index_gives_the_feedback_postings_the_table_holds(kb):
    """RM3 reads the feedback chunks' postings: from the forward index for packed chunks, the same
    (term, tf, dl) rows as the postings table; the tail's keys are left to the table."""
    from kbctl.search import forward
    from kbctl.store import lexical as packed

    ns = _write(kb, "fb_forward_rows", MANY[:8])
    conn = kb.connection()
    packed.pack(conn, ns.id, tenant=ns.tenant)
    _write(kb, "fb_forward_rows", MANY[8:])
    forward.clear_cache()
    keys = [
        tuple(r) for r in conn.execute("SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))
    ]
    rows, rest = forward.postings(conn, keys)
    hi = max(s.hi for s in packed.segments(conn, [ns.id]))
    assert sorted(rest) == sorted(k for k in keys if k[1] > hi) and rest
    table = store.feedback_postings(conn, [k for k in keys if k[1] <= hi])
    assert sorted(rows) == sorted((a, c, t, pytest.approx(tf), pytest.approx(dl)) for a, c, t, tf, dl in table)


def test_a_large_forward_index_is_read_in_the_background(kb, monkeypatch):
    """A segment's forward index above ``SYNC_BYTES`` is not read while a search waits: its
    candidates go to the statement, the arrays are read on a background thread over the side
    connection, and the searches after it use them; without a side connection it is never read."""
    import math

    from kbctl.search import forward
    from kbctl.store import lexical as packed

    ns = _write(kb, "fb_forward_bg", MANY)
    conn = kb.connection()
    packed.pack(conn, ns.id, tenant=ns.tenant)
    forward.clear_cache()
    monkeypatch.setattr(forward, "SYNC_BYTES", 0)
    n, total = store.lexical_stats(conn, [ns.id])
    df = store.vocabulary_df(conn, [ns.id], ["refund", "bank"])
    weights = [math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in ("refund", "bank")]
    keys = [
        tuple(r) for r in conn.execute("SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))
    ]
    args = dict(k1=0.9, b=0.4, avgdl=total / n)
    done, rest = forward.candidate_bm25(conn, keys, ["refund", "bank"], weights, **args)
    assert not done and sorted(rest) == sorted(keys)  # no side connection: left to the statement
    forward.wait_for_loads(30)
    assert not forward._CACHE  # and never read
    sides: list[str] = []

    def side(purpose):
        sides.append(purpose)
        return kb.session.side_connection(purpose)

    done, rest = forward.candidate_bm25(conn, keys, ["refund", "bank"], weights, side=side, **args)
    assert not done and sorted(rest) == sorted(keys)  # the search did not wait for the read
    forward.wait_for_loads(30)
    assert sides == ["forward"]
    done, rest = forward.candidate_bm25(conn, keys, ["refund", "bank"], weights, side=side, **args)
    assert not rest and done  # read: every packed candidate scored in memory
    sql = store.candidate_bm25(conn, keys, ["refund", "bank"], weights, **args)
    assert done == pytest.approx(sql, rel=1e-12)


def test_a_segment_packed_before_the_forward_index_gets_one_after_the_next_ingest(kb, tmp_path, monkeypatch):
    """An upgraded store's segments have no forward row (migration 017 does not backfill): the
    lexical step after the next ingest packs the namespace again, once, so they get one."""
    from kbctl.store import lexical as packed

    monkeypatch.setattr(packed, "PACK_MIN", 1)  # the fixture is small; a namespace this size keeps a segment
    ns = _write(kb, "fb_upgrade", MANY)
    conn = kb.connection()
    packed.pack(conn, ns.id, tenant=ns.tenant)
    conn.execute("DELETE FROM kbctl.lexical_forward WHERE namespace_id = %s", (ns.id,))  # as before 017
    assert [s[6] for s in packed.forward_segments(conn, [ns.id])] == [None]
    doc = tmp_path / "new.md"
    doc.write_text("# New\n\nA refund note written after the upgrade.\n")
    events: list = []
    kb.ingest([str(doc)], namespace="fb_upgrade", progress=lambda e, d: events.append((e, d)))
    # the run says so before it starts (at a million chunks it takes minutes), and only then
    assert [d["namespace"] for e, d in events if e == "repacking"] == ["fb_upgrade"]
    segs = packed.forward_segments(conn, [ns.id])
    assert segs and all(s[6] is not None and s[6] > 0 for s in segs)
    assert packed.maintain(conn, ns.id, tenant=ns.tenant) is None  # done once: nothing due now
    events.clear()
    doc.write_text("# New\n\nA refund note written after the upgrade, changed.\n")
    kb.ingest([str(doc)], namespace="fb_upgrade", progress=lambda e, d: events.append((e, d)))
    assert "repacking" not in [e for e, _ in events]


_CLOSE_DURING_READ = r"""
import sys, time
import kbctl
from kbctl.search import forward
from kbctl.store import lexical as packed

home, tenant, name = sys.argv[1:4]
kb = kbctl.open(home=home, tenant=tenant, profile="hash-384")
conn = kb.connection()
ns_id = conn.execute("SELECT id FROM kbctl.namespaces WHERE name = %s", (name,)).fetchone()[0]
keys = [tuple(r) for r in conn.execute("SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s", (ns_id,))]
forward.SYNC_BYTES = 0  # every segment is read in the background
read = packed.forward

def slow(c, *a):  # a large segment: the read takes a while on the side connection
    c.execute("SELECT pg_sleep(4)")
    return read(c, *a)

packed.forward = slow
forward.candidate_bm25(conn, keys, ["refund"], [1.0], k1=0.9, b=0.4, avgdl=10.0, side=kb.session.side_connection)
time.sleep(0.5)  # the read is under way
t0 = time.perf_counter()
kb.close()
print(f"closed in {time.perf_counter() - t0:.2f} s", flush=True)
assert not forward._LOADING, forward._LOADING
time.sleep(1.0)
assert not forward._CACHE, "the read went on after close"
print("ok", flush=True)
"""


def test_closing_during_a_background_read_cancels_it_and_exits_cleanly(kb, kb_home, tenant):
    """``kb.close()`` while a forward index is read in the background (a one-shot ``kbctl search``
    at the million ends while its first feedback query's read has just begun) cancels the read and
    waits for its thread before closing the connections. Closing a connection another thread is
    reading from freed libpq's state under it: the process died of SIGSEGV at exit."""
    import time

    from kbctl.store import lexical as packed

    ns = _write(kb, "fb_forward_close", MANY)
    packed.pack(kb.connection(), ns.id, tenant=ns.tenant)
    t0 = time.perf_counter()
    closed = _closed_in(_CLOSE_DURING_READ, "closed in ", str(kb_home), tenant, ns.name)
    assert closed < 3.0, f"close waited for the whole read ({closed} s)"
    assert time.perf_counter() - t0 < 60


def _closed_in(script: str, label: str, *args: str) -> float:
    """Run ``script`` in a new Python process: it must exit 0 and end with "ok"; the seconds it
    printed after ``label``."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-2000:])
    assert p.stdout.strip().endswith("ok"), p.stdout
    return float(p.stdout.split(label)[1].split(" s")[0])


_CLOSE_WHILE_WAITING = r"""
import sys, time
import kbctl
from kbctl.search import forward
from kbctl.store import lexical as packed

home, tenant, first, second = sys.argv[1:5]
a = kbctl.open(home=home, tenant=tenant, profile="hash-384")
b = kbctl.open(home=home, tenant=tenant, profile="hash-384")

def keys_of(kb, name):
    conn = kb.connection()
    ns_id = conn.execute("SELECT id FROM kbctl.namespaces WHERE name = %s", (name,)).fetchone()[0]
    rows = conn.execute("SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s", (ns_id,))
    return ns_id, [tuple(r) for r in rows]

forward.SYNC_BYTES = 0
read = packed.forward

def slow(c, *args):
    c.execute("SELECT pg_sleep(2)")
    return read(c, *args)

packed.forward = slow
ns_a, keys_a = keys_of(a, first)
ns_b, keys_b = keys_of(b, second)
args = dict(k1=0.9, b=0.4, avgdl=10.0)
forward.candidate_bm25(a.connection(), keys_a, ["refund"], [1.0], side=a.session.side_connection, **args)
time.sleep(0.3)  # a's read is under way; b's waits for it
forward.candidate_bm25(b.connection(), keys_b, ["refund"], [1.0], side=b.session.side_connection, **args)
time.sleep(0.2)
t0 = time.perf_counter()
b.close()  # b's read has not begun: dropped, without waiting for a's
print(f"b closed in {time.perf_counter() - t0:.2f} s", flush=True)
forward.wait_for_loads(30)
cached = {k[0] for k, v in forward._CACHE.items() if v is not None}
assert ns_a in cached and ns_b not in cached, (cached, ns_a, ns_b)
a.close()
print("ok", flush=True)
"""


def test_closing_a_session_whose_read_waits_for_another_does_not_wait_for_it(kb, kb_home, tenant):
    """Background reads go one at a time (``_READER``), across sessions. A session closing while its
    read waits for another session's drops its read at once instead of waiting for the other's to
    end; the other session's read completes."""
    from kbctl.store import lexical as packed

    for name in ("fb_forward_wait_a", "fb_forward_wait_b"):
        ns = _write(kb, name, MANY)
        packed.pack(kb.connection(), ns.id, tenant=ns.tenant)
    closed = _closed_in(
        _CLOSE_WHILE_WAITING, "b closed in ", str(kb_home), tenant, "fb_forward_wait_a", "fb_forward_wait_b"
    )
    assert closed < 1.0, f"close waited for another session's read ({closed} s)"


def test_cancelling_a_request_leaves_the_background_read_alone(kb, monkeypatch):
    """``Session.cancel`` (the server's, when a client goes away) cancels the request's statements,
    not a background read of the forward index on the same session: that read is no request's, and
    cancelling it threw away up to 10 s of reading at the million, to start again on the next query."""
    import time

    from kbctl.search import forward
    from kbctl.store import lexical as packed

    ns = _write(kb, "fb_forward_cancel", MANY)
    conn = kb.connection()
    packed.pack(conn, ns.id, tenant=ns.tenant)
    forward.clear_cache()
    monkeypatch.setattr(forward, "SYNC_BYTES", 0)
    read = packed.forward

    def slow(c, *args):
        c.execute("SELECT pg_sleep(1)")
        return read(c, *args)

    monkeypatch.setattr(packed, "forward", slow)
    keys = [
        tuple(r) for r in conn.execute("SELECT namespace_id, id FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))
    ]
    args = dict(k1=0.9, b=0.4, avgdl=10.0)
    forward.candidate_bm25(conn, keys, ["refund"], [1.0], side=kb.session.side_connection, **args)
    time.sleep(0.3)  # the read is under way
    kb.session.cancel(timeout=2)
    forward.wait_for_loads(30)
    assert any(k[0] == ns.id and v is not None for k, v in forward._CACHE.items())
    done, rest = forward.candidate_bm25(conn, keys, ["refund"], [1.0], side=kb.session.side_connection, **args)
    assert done and not rest
