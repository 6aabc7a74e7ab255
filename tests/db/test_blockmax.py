"""The packed lexical lane returns exactly what scoring every posting returns.

One namespace of generated records (a Zipfian vocabulary, lengths from 5 to 150 terms, so terms
have from one posting to most of the chunks and the length normalisation matters) is packed into
two segments with tiny blocks (8 postings: many blocks per term, so pruning has work to do), has an
unpacked tail on top, and has had documents replaced since it was packed (their old chunks are
still in the segments). For random queries and depths, the lane's hits (block-max over the
segments, postings for the tail) are compared with the exhaustive BM25 statement over the whole
namespace: the same chunks in the same order, with the same scores.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbctl.search import blockmax
from kbctl.search.lanes import lexical_lane
from kbctl.store import lexical as packed
from kbctl.store import search as store
from kbctl.textutil.analyze import Analyzer

VOCAB = [f"w{i:03d}" for i in range(300)]
NS = "packed"


def _text(rng: random.Random) -> str:
    n = int(rng.choice([5, 10, 20, 40, 80, 150]) * rng.uniform(0.7, 1.3))
    return " ".join(VOCAB[min(int(rng.paretovariate(1.1)) - 1, len(VOCAB) - 1)] for _ in range(n))


def _records(ids, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": f"r{i}", "title": "", "text": _text(rng)} for i in ids]


@pytest.fixture
def corpus(kb):
    kb.ingest_records(_records(range(0, 500), 1), NS, verify=False)
    conn = kb.connection()
    ns = kb.namespace(NS)
    first = packed.pack(conn, ns.id, k1=1.2, b=0.75, block=8)
    kb.ingest_records(_records(range(500, 800), 2), NS, verify=False)
    second = packed.pack(conn, ns.id, k1=1.2, b=0.75, block=8)
    kb.ingest_records(_records(range(800, 900), 3), NS, verify=False)  # the tail
    kb.ingest_records(_records(range(0, 500, 7), 4), NS, verify=False)  # replaced: dead chunks in segment 1
    assert first["segment"] == 1 and second["segment"] == 2 and first["chunks"] >= 500
    return kb, conn, ns


def _exhaustive(conn, ns, terms: dict[str, float], k: int, profile) -> list[tuple[int, float]]:
    k1, b = profile.lexical.k1, profile.lexical.b
    n, total = store.lexical_stats(conn, [ns.id])
    df = store.vocabulary_df(conn, [ns.id], list(terms))
    present = [t for t in terms if t in df]
    if not present:
        return []
    import math

    w = [terms[t] * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in present]
    rows = store.bm25_rows(conn, store.bm25_statement(()), [ns.id], present, w, k1=k1, b=b, avgdl=total / n, k=k)
    rows.sort(key=lambda r: (-round(r[2], 9), r[1]))
    return [(r[1], r[2]) for r in rows]


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert len(got) == len(want)
    for (_gc, gs), (_wc, ws) in zip(got, want):
        assert gs == pytest.approx(ws, rel=1e-9, abs=1e-12)
    # Chunk ids agree wherever the score is not tied with a neighbour's.
    for i, (gc, gs) in enumerate(got):
        tied = any(abs(gs - s) < 1e-9 for j, (_, s) in enumerate(want) if j != i)
        if not tied:
            assert gc == want[i][0], (i, got, want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(VOCAB[:60] + VOCAB[-5:] + ["absent"]), min_size=1, max_size=8),
    weights=st.lists(st.sampled_from([1.0, 0.5, 2.0, 0.1]), min_size=8, max_size=8),
    k=st.sampled_from([1, 3, 10, 50, 200]),
    small=st.booleans(),
)
def test_the_packed_lane_ranks_exactly_as_every_posting(corpus, monkeypatch, words, weights, k, small):
    kb, conn, ns = corpus
    if small:  # rounds of a few postings: many rounds, θ moved by dead chunks, completions by key
        monkeypatch.setattr(blockmax, "FIRST_ROUND", 8)
        monkeypatch.setattr(blockmax, "MAX_CANDIDATES", 4)
    terms = {w: weights[i] for i, w in enumerate(words)}
    profile = kb.namespaces.profile_for(NS, None)
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, k, (), profile, info=info)
    assert "packed" in info or not hits  # no term of the query is in the namespace
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, k, profile))


def test_pruning_reads_a_fraction_of_the_postings_and_never_a_deleted_chunk(corpus, monkeypatch):
    kb, conn, ns = corpus
    monkeypatch.setattr(blockmax, "FIRST_ROUND", 64)  # this corpus is a few rounds of the real size
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w000": 1.0, "w001": 1.0, "w150": 1.0}  # two of the commonest terms and a rare one
    df = store.vocabulary_df(conn, [ns.id], list(terms))
    assert df["w150"] <= 10 < df["w001"]
    info: dict = {}
    # The chunks holding the rare term lead by far: the common terms' blocks cannot change the top 3.
    hits = lexical_lane(conn, [ns], terms, 3, (), profile, info=info)
    assert info["packed"]["postings"] < sum(df.values()) / 2, info
    live = {r[0] for r in conn.execute("SELECT id FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))}
    assert {h.chunk_id for h in hits} <= live
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 3, profile))


def test_every_chunk_of_a_small_namespace_is_found_when_k_exceeds_it(corpus):
    kb, conn, ns = corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {VOCAB[-1]: 1.0, VOCAB[-2]: 1.0}
    hits = lexical_lane(conn, [ns], terms, 10_000, (), profile)
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 10_000, profile))


def test_a_full_repack_drops_the_dead_and_keeps_the_ranking(corpus):
    kb, conn, ns = corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w002": 1.0, "w010": 1.0, "w040": 1.0}
    before = [(h.chunk_id, h.score) for h in lexical_lane(conn, [ns], terms, 20, (), profile)]
    out = packed.pack(conn, ns.id, k1=1.2, b=0.75, keep=0)
    live = conn.execute("SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    assert out["chunks"] == live and [s.segment for s in packed.segments(conn, [ns.id])] == [out["segment"]]
    info: dict = {}
    after = [(h.chunk_id, h.score) for h in lexical_lane(conn, [ns], terms, 20, (), profile, info=info)]
    assert info["packed"]["dead"] == 0
    _same(after, before)


def test_analyzer_terms_are_what_the_records_hold():
    # The generated words survive the analyzer unchanged (no stemming, no stop word), so the
    # queries above are the terms stored.
    a = Analyzer("english")
    assert a.terms("w000 w123 w299") == ["w000", "w123", "w299"]


def test_a_namespace_repacked_while_a_query_ran_is_scored_from_its_postings(corpus, monkeypatch):
    # The lane read the segments' directories, then `kbctl db optimize` rewrote the segments before
    # it read their blocks: the blocks it asks for are gone. It must notice and score the postings,
    # not return a ranking with the missing blocks' postings left out.
    kb, conn, ns = corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w001": 1.0, "w007": 1.0, "w030": 0.5}
    stale = packed.plan(conn, [ns.id], list(terms))
    packed.pack(conn, ns.id, k1=1.2, b=0.75, keep=0)
    assert [s.segment for s in packed.segments(conn, [ns.id])] == [3]  # 1 and 2 replaced; numbers are not reused
    monkeypatch.setattr(packed, "plan", lambda *a, **kw: stale)
    with pytest.raises(blockmax.Stale):
        blockmax.top_k(conn, [ns.id], list(terms), [1.0, 1.0, 0.5], 10, k1=1.2, b=0.75, avgdl=50.0, directory=stale[1])
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, 20, (), profile, info=info)
    assert "packed" not in info or not info["packed"].get("postings")
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 20, profile))
