"""``[cache]``: the memory one process keeps for packed lexical segments, set when a knowledge base
opens; a cache turned off (0) changes where numbers come from, never the numbers."""

from __future__ import annotations

import pytest

from kbctl.search import memory
from tests.db.test_prf import MANY, _banded
from tests.db.test_store import _write

DEFAULTS = {"forward": 512 << 20, "segments": 512 << 20, "term_rows": 256 << 20}


@pytest.fixture(autouse=True)
def _default_limits():
    yield
    memory.configure(forward_mb=512, segments_mb=512, term_rows_mb=256)


def _open(kb_home, tenant, tmp_path, table: str):
    import kbctl

    cfg = tmp_path / "cache.toml"
    cfg.write_text(table)
    return kbctl.open(home=kb_home, tenant=tenant, profile="hash-384", config=cfg)


def test_opening_a_knowledge_base_sets_the_process_limits(kb_home, tenant, tmp_path):
    kb = _open(kb_home, tenant, tmp_path, "[cache]\nforward_mb = 0\nsegments_mb = 3\nterm_rows_mb = 1\n")
    try:
        assert memory.limits() == {"forward": 0, "segments": 3 << 20, "term_rows": 1 << 20}
    finally:
        kb.close()
    kb = _open(kb_home, tenant, tmp_path, "")  # the packaged defaults again
    try:
        assert memory.limits() == DEFAULTS
    finally:
        kb.close()


def test_a_negative_limit_is_refused_with_its_key(kb_home, tenant, tmp_path):
    from kbctl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"cache\.term_rows_mb"):
        _open(kb_home, tenant, tmp_path, "[cache]\nterm_rows_mb = -1\n")


def test_with_the_forward_cache_off_feedback_scores_the_same_from_the_statement(kb_home, tenant, tmp_path, monkeypatch):
    from kbctl.search import forward
    from kbctl.store import lexical as packed
    from kbctl.store import search as store

    reads, statement = [], []
    real_load, real_bm25 = forward._load, store.candidate_bm25
    monkeypatch.setattr(forward, "_load", lambda *a: reads.append(a[1]) or real_load(*a))
    monkeypatch.setattr(
        store,
        "candidate_bm25",
        lambda conn, cands, *a, **kw: statement.append(len(cands)) or real_bm25(conn, cands, *a, **kw),
    )

    with _banded(kb_home, tenant, tmp_path, 0.0, 1.0) as kb:  # every query takes feedback
        ns = _write(kb, "cache_forward", MANY)
        packed.pack(kb.connection(), ns.id, tenant=ns.tenant)
        forward.clear_cache()
        q = "refund payment bank"
        on = kb.search(q, "cache_forward", mode="hybrid", k=12)
        assert on.details["prf"]["applied"] is True
        assert any(v is not None for v in forward._CACHE.values()), "the default reads the forward index"
        assert reads and not statement, "packed candidates are scored in memory"
        reads.clear()

        memory.configure(forward_mb=0, segments_mb=512, term_rows_mb=256)
        assert not forward._CACHE, "turning the cache off empties it at once"
        off = kb.search(q, "cache_forward", mode="hybrid", k=12)
        assert not reads and not forward._CACHE, "with the cache off no forward index is read"
        assert sum(statement) == on.details["prf"]["candidates"], "the statement scores every candidate"
        assert [h.chunk_id for h in off.hits] == [h.chunk_id for h in on.hits]
        assert [h.score for h in off.hits] == pytest.approx([h.score for h in on.hits], rel=1e-9)


def test_segment_limits_keep_one_segment_or_none(kb_home, tenant, tmp_path):
    from kbctl.search import termarrays
    from kbctl.store import lexical as packed

    with _banded(kb_home, tenant, tmp_path, 0.0, 1.0) as kb:
        conn = kb.connection()
        names = ("cache_seg_a", "cache_seg_b")
        for name in names:
            ns = _write(kb, name, MANY)
            packed.pack(conn, ns.id, tenant=ns.tenant)
        ids = [kb.namespaces.get(name).id for name in names]
        termarrays.clear_cache()
        for name in names:
            assert kb.search("refund payment", name, mode="lexical", k=5).hits
        held = [key for key in termarrays._DOCS if key[0] in ids]
        assert len(held) == 2, "both namespaces' segments are kept under the default limit"

        memory.configure(forward_mb=512, segments_mb=1, term_rows_mb=256)  # 1 MB: a few hundred bytes fit
        assert len([key for key in termarrays._DOCS if key[0] in ids]) == 2, "both still fit in 1 MB"
        memory.DOCS_BYTES = 1  # smaller than one segment: the last one used is kept
        termarrays.trim()
        assert list(termarrays._DOCS) == held[-1:]

        memory.configure(forward_mb=512, segments_mb=0, term_rows_mb=0)
        assert not termarrays._DOCS and not termarrays._NORMS and not termarrays._ROWS
        r = kb.search("refund payment", names[0], mode="lexical", k=5)
        assert r.hits and not termarrays._DOCS, "with the cache off a search reads what it needs and keeps nothing"


def test_assigning_new_settings_applies_their_cache_limits(kb_home, tenant, tmp_path):
    """``kb.settings = ...`` reaches everything the settings govern, the process's caches included
    (they were read only when the knowledge base opened)."""
    kb = _open(kb_home, tenant, tmp_path, "")
    try:
        assert memory.limits() == DEFAULTS
        kb.settings = kb.settings.with_overrides({"cache.forward_mb": 0, "cache.term_rows_mb": 2})
        assert memory.limits() == {"forward": 0, "segments": 512 << 20, "term_rows": 2 << 20}
    finally:
        kb.close()
