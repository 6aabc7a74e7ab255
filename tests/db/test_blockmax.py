"""The packed lexical lane returns exactly what scoring every posting returns.

One namespace of generated records (a Zipfian vocabulary, lengths from 5 to 150 terms, so terms
have from one posting to most of the chunks and the length normalisation matters; some titled, so
some tfs are fractions) is packed into two segments, has an unpacked tail on top, and has had
documents replaced since it was packed (their old chunks are still in the segments). For random
queries and depths, the lane's hits (term arrays for the segments, postings for the tail) are
compared with the exhaustive BM25 statement over the whole namespace: the same chunks in the same
order, with the same scores. (The file keeps the name of the block-max lane it first tested.)
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbctl.search import termarrays
from kbctl.search.lanes import lexical_lane
from kbctl.store import lexical as packed
from kbctl.store import search as store
from kbctl.textutil.analyze import Analyzer
from tests.conftest import TEST_DSN, _create_tenant

VOCAB = [f"w{i:03d}" for i in range(300)]
NS = "packed"


def _text(rng: random.Random) -> str:
    n = int(rng.choice([5, 10, 20, 40, 80, 150]) * rng.uniform(0.7, 1.3))
    return " ".join(VOCAB[min(int(rng.paretovariate(1.1)) - 1, len(VOCAB) - 1)] for _ in range(n))


def _records(ids, seed: int) -> list[dict]:
    rng = random.Random(seed)
    # a title's terms count title_weight (0.5 here: fractional tfs, stored as float4) more
    return [{"id": f"r{i}", "title": VOCAB[i % 40] if i % 9 == 0 else "", "text": _text(rng)} for i in ids]


def _build(kb_home, tenant: str, tmp_path):
    """The namespace (a KnowledgeBase, its connection, the namespace): two segments, a tail, and
    documents replaced since the first pack."""
    import kbctl

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profiles.hash-384.lexical]\ntitle_weight = 0.5\n")
    kb = kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384")
    kb.ingest_records(_records(range(0, 500), 1), NS, verify=False)
    conn = kb.connection()
    ns = kb.namespace(NS)
    first = packed.pack(conn, ns.id, tenant=ns.tenant)
    kb.ingest_records(_records(range(500, 800), 2), NS, verify=False)
    second = packed.pack(conn, ns.id, tenant=ns.tenant)
    kb.ingest_records(_records(range(800, 900), 3), NS, verify=False)  # the tail
    kb.ingest_records(_records(range(0, 500, 7), 4), NS, verify=False)  # replaced: dead chunks in segment 1
    assert first["segment"] == 1 and second["segment"] == 2 and first["chunks"] >= 500
    return kb, conn, ns


@pytest.fixture
def corpus(kb_home, tenant, tmp_path):
    """The namespace, made for this test in its tenant: for the tests that write to it (a repack, an ingest)."""
    kb, conn, ns = _build(kb_home, tenant, tmp_path)
    yield kb, conn, ns
    kb.close()


@pytest.fixture(scope="module")
def _read_only(kb_home, tmp_path_factory):
    tenant = "t_blockmax_read"
    if TEST_DSN:
        _create_tenant(tenant)
    kb, conn, ns = _build(kb_home, tenant, tmp_path_factory.mktemp("blockmax"))
    made = _state(conn, ns)
    yield kb, conn, ns
    assert _state(conn, ns) == made, "a test given read_corpus wrote to it: give it corpus"
    kb.close()


def _state(conn, ns) -> tuple:
    """What a write to the namespace would change: its segments, its chunks, its postings."""
    return (
        [s.segment for s in packed.segments(conn, [ns.id])],
        conn.execute("SELECT count(*), max(id) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone(),
        conn.execute("SELECT count(*) FROM kbctl.lexical_postings WHERE namespace_id = %s", (ns.id,)).fetchone(),
    )


@pytest.fixture
def read_corpus(_read_only):
    """The namespace, made once for the module in a tenant of its own, for the tests that only query
    it (none packs, ingests or deletes); nothing of it held in memory from an earlier test, as for a
    namespace made for the test."""
    termarrays.clear_cache()
    return _read_only


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
    cold=st.booleans(),
    prune=st.booleans(),
)
def test_the_packed_lane_ranks_exactly_as_every_posting(read_corpus, monkeypatch, words, weights, k, cold, prune):
    kb, conn, ns = read_corpus
    if cold:  # the segments' chunk ids and lengths read again, not kept from an earlier query
        termarrays.clear_cache()
    if prune:  # MaxScore at this corpus's size: θ estimated before every term (its real floor is 4096 postings)
        monkeypatch.setattr(termarrays, "ESTIMATE_AT", 1)
        monkeypatch.setattr(termarrays, "_SAMPLE", 4)
    terms = {w: weights[i] for i, w in enumerate(words)}
    profile = kb.namespaces.profile_for(NS, None)
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, k, (), profile, info=info)
    assert "packed" in info or not hits  # no term of the query is in the namespace
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, k, profile))


def test_the_lane_reads_each_term_once_and_never_returns_a_deleted_chunk(read_corpus):
    kb, conn, ns = read_corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w000": 1.0, "w001": 1.0, "w150": 1.0}  # two of the commonest terms and a rare one
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, 200, (), profile, info=info)
    # Each term's arrays are read once per segment: the postings read are what the segments hold
    # of the terms (the replaced documents' old chunks included), no more.
    packed_postings = conn.execute(
        "SELECT sum(length(ords) / 4) FROM kbctl.lexical_terms WHERE namespace_id = %s AND term = ANY(%s)",
        (ns.id, list(terms)),
    ).fetchone()[0]
    # A term whose tfs are whole numbers keeps one byte each; one with a titled chunk's 0.5, float4.
    widths = {
        len(tfs) // (len(ords) // 4)
        for ords, tfs in conn.execute("SELECT ords, tfs FROM kbctl.lexical_terms WHERE namespace_id = %s", (ns.id,))
    }
    assert widths == {1, 4}
    assert info["packed"]["segments"] == 2 and info["packed"]["postings"] == packed_postings
    assert info["packed"]["dead"] > 0  # the replaced documents' chunks were among the best and checked
    live = {r[0] for r in conn.execute("SELECT id FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))}
    assert {h.chunk_id for h in hits} <= live
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 200, profile))


def test_maxscore_skips_the_common_terms_postings_and_stays_exact(read_corpus, monkeypatch):
    kb, conn, ns = read_corpus
    monkeypatch.setattr(termarrays, "ESTIMATE_AT", 1)
    monkeypatch.setattr(termarrays, "_SAMPLE", 4)
    profile = kb.namespaces.profile_for(NS, None)
    # two rare terms carry the score; four of the commonest add little to it and hold most postings
    terms = {"w150": 1.0, "w170": 1.0, "w000": 1.0, "w001": 1.0, "w002": 1.0, "w003": 1.0}
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, 3, (), profile, info=info)
    assert info["packed"]["scored"] < 0.8 * info["packed"]["postings"], info  # without pruning: all of them
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 3, profile))


def test_a_threshold_set_too_high_is_noticed_and_the_segment_scored_again(read_corpus, monkeypatch):
    # The pruning's θ is an estimate. One that fewer than k chunks reach would skip chunks of the
    # top k: the segment is scored again with every posting, and the result is still exact.
    kb, conn, ns = read_corpus
    monkeypatch.setattr(termarrays, "ESTIMATE_AT", 1)
    monkeypatch.setattr(termarrays, "_estimate", lambda acc, k: 1e9)
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w004": 1.0, "w020": 1.0, "w090": 1.0}
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, 10, (), profile, info=info)
    assert info["packed"]["rescored"] == info["packed"]["segments"] == 2
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 10, profile))


def test_common_terms_rows_are_held_in_memory_and_a_repack_is_noticed(corpus, monkeypatch):
    # Rows of ROW_MIN postings or more are kept: the next query's plan leaves their arrays out and
    # the lane takes them from memory, with the same ranking. After a repack the held rows are of
    # segments that are gone: the new segment's rows are read, never the old ones used.
    kb, conn, ns = corpus
    monkeypatch.setattr(termarrays, "ROW_MIN", 50)
    termarrays.clear_cache()
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w000": 1.0, "w003": 1.0, "w150": 1.0}
    want = _exhaustive(conn, ns, terms, 20, profile)
    first: dict = {}
    _same([(h.chunk_id, h.score) for h in lexical_lane(conn, [ns], terms, 20, (), profile, info=first)], want)
    assert first["packed"]["held"] == 0 and sorted(termarrays.held([ns.id], list(terms))) == ["w000", "w003"]
    second: dict = {}
    _same([(h.chunk_id, h.score) for h in lexical_lane(conn, [ns], terms, 20, (), profile, info=second)], want)
    assert second["packed"]["held"] == 4  # two common terms in two segments
    packed.pack(conn, ns.id, tenant=ns.tenant, keep=0)  # one new segment; the held rows are of the two replaced
    third: dict = {}
    got = [(h.chunk_id, h.score) for h in lexical_lane(conn, [ns], terms, 20, (), profile, info=third)]
    assert third["packed"]["held"] == 0 and third["packed"]["reread"] == 2 and third["packed"]["segments"] == 1
    _same(got, _exhaustive(conn, ns, terms, 20, profile))


def test_every_chunk_of_a_small_namespace_is_found_when_k_exceeds_it(read_corpus):
    kb, conn, ns = read_corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {VOCAB[-1]: 1.0, VOCAB[-2]: 1.0}
    hits = lexical_lane(conn, [ns], terms, 10_000, (), profile)
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 10_000, profile))


def test_a_full_repack_drops_the_dead_and_keeps_the_ranking(corpus):
    kb, conn, ns = corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w002": 1.0, "w010": 1.0, "w040": 1.0}
    before = [(h.chunk_id, h.score) for h in lexical_lane(conn, [ns], terms, 20, (), profile)]
    out = packed.pack(conn, ns.id, tenant=ns.tenant, keep=0)
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
    # The lane read the segments' term arrays, then `kbctl db optimize` rewrote the segments before
    # it read their chunk ids (not kept in memory yet): they are gone. It must notice and score the
    # postings, not return a ranking without them.
    kb, conn, ns = corpus
    profile = kb.namespaces.profile_for(NS, None)
    terms = {"w001": 1.0, "w007": 1.0, "w030": 0.5}
    stale = packed.plan(conn, [ns.id], list(terms))
    packed.pack(conn, ns.id, tenant=ns.tenant, keep=0)
    assert [s.segment for s in packed.segments(conn, [ns.id])] == [3]  # 1 and 2 replaced; numbers are not reused
    monkeypatch.setattr(packed, "plan", lambda *a, **kw: stale)
    termarrays.clear_cache()
    with pytest.raises(termarrays.Stale):
        termarrays.top_k(conn, list(terms), [1.0, 1.0, 0.5], 10, k1=1.2, b=0.75, avgdl=50.0, rows=stale[1])
    info: dict = {}
    hits = lexical_lane(conn, [ns], terms, 20, (), profile, info=info)
    assert "packed" not in info or not info["packed"].get("postings")
    _same([(h.chunk_id, h.score) for h in hits], _exhaustive(conn, ns, terms, 20, profile))


@pytest.mark.embedded_only  # makes the planner's figures stale by hand: only a superuser writes pg_class
def test_a_pack_plans_with_the_postings_tables_real_size(corpus):
    """Right after a bulk ingest into a new database (a fast embedder, autovacuum not yet round), the
    planner took ``lexical_postings`` for empty and joined a pack's postings to its chunks' ordinals
    by a nested loop: 100 s to pack 6,000 chunks, twelve minutes for 20,000. A pack now brings the
    table's statistics up to date first (``lexical/analyze_postings``), in its transaction."""
    kb, conn, ns = corpus
    kb.ingest_records(_records(range(900, 1000), 5), NS, verify=False)
    from kbctl.store.roles import as_owner

    with conn.transaction(), as_owner(conn):
        conn.execute("UPDATE pg_class SET reltuples = 0, relpages = 0 WHERE oid = 'kbctl.lexical_postings'::regclass")
    packed.pack(conn, ns.id, tenant=ns.tenant)
    rows = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'kbctl.lexical_postings'::regclass").fetchone()[0]
    mine = conn.execute("SELECT count(*) FROM kbctl.lexical_postings WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    assert rows >= 0.5 * mine, (rows, mine)
