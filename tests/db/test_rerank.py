"""The reranking path with a tiny randomly initialised cross-encoder the test builds and saves."""

from __future__ import annotations

import pytest

import kbctl
from tests.db.test_store import DOCS, _write


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from kbctl.embed.st import resolve_model_path

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-ce")
    tok = BertTokenizerFast.from_pretrained(resolve_model_path("all-MiniLM-L6-v2"))
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        num_labels=1,
        max_position_embeddings=512,
    )
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _kb(tmp_path, kb_home, tenant, model):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(f'[profiles.hash-384.rerank]\nkind = "cross-encoder"\nmodel = "{model}"\ntop_n = 10\n')
    return kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384")


def test_cross_encoder_reorders_by_its_scores(tmp_path, kb_home, tenant, tiny_cross_encoder):
    from kbctl.search.rerank import CrossEncoderReranker

    kb = _kb(tmp_path, kb_home, tenant, tiny_cross_encoder)
    _write(kb, "rr", DOCS)
    fused = kb.search("refunds invoices sign-on", "rr", rerank=False)
    r = kb.search("refunds invoices sign-on", "rr", rerank=True)
    assert r.details.get("reranked") is True and not r.degraded
    ce = CrossEncoderReranker(str(tiny_cross_encoder))
    expected = ce.score("refunds invoices sign-on", [h.text for h in fused.hits])
    want = [h.chunk_id for _, h in sorted(zip(expected, fused.hits), key=lambda x: -x[0])]
    assert [h.chunk_id for h in r.hits] == want
    assert [h.score for h in r.hits] == pytest.approx(sorted(expected, reverse=True), abs=1e-5)
    # metadata-only queries never go through the reranker
    m = kb.search("", "rr", filters=["tags=billing"], rerank=True)
    assert m.strategy == "metadata" and "reranked" not in m.details
    kb.close()


def test_reranker_that_fails_to_load_keeps_fused_order(tmp_path, kb_home, tenant):
    kb = _kb(tmp_path, kb_home, tenant, tmp_path / "no-such-model")
    _write(kb, "rr2", DOCS)
    fused = kb.search("refunds", "rr2", rerank=False)
    r = kb.search("refunds", "rr2", rerank=True)
    assert [h.chunk_id for h in r.hits] == [h.chunk_id for h in fused.hits]
    assert any("reranker unavailable" in n for n in r.notes)
    kb.close()
