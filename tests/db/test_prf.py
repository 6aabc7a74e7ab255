"""Hybrid pseudo-relevance feedback, readable scores and the own-heading weight on the real store."""

from __future__ import annotations

import numpy as np
import pytest

from kbctl.errors import UsageError
from kbctl.store import search as store
from kbctl.types import Block, Document
from tests.db.test_store import DOCS, _write


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
