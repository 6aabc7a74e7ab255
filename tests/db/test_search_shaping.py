"""Degradation, prompt-ready context, explain and result shaping."""

from __future__ import annotations

import json

import numpy as np

import kbctl
from kbctl.search.context import estimate_tokens
from tests.db.test_store import DOCS, _doc, _write


def test_missing_model_degrades_to_lexical(tmp_path, kb_home, tenant):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.gone]\nmodel = "/nonexistent/model-dir"\n')
    kb = kbctl.open(config=cfg, home=kb_home, tenant=tenant)
    # vectors written while "the model was there" (384-d, like the pinned profile)
    from kbctl.chunk import chunk_document
    from kbctl.store import ensure_namespace, write_documents
    from kbctl.textutil.analyze import get_analyzer
    from kbctl.types import EmbeddedChunk

    rng = np.random.default_rng(0)
    ns = ensure_namespace(kb.connection(), "deg", kb.tenant, kb.settings.profile("gone"))
    chunker = kb.settings.profile("hash-384")
    items = [(d, [EmbeddedChunk(c, tuple(rng.normal(size=384))) for c in chunk_document(d, chunker)]) for d in DOCS]
    write_documents(kb.connection(), ns, items, get_analyzer("english"))
    r = kb.search("refunds business days", "deg", profile="gone")
    assert r.degraded is True and r.hits and r.hits[0].source == "mem://refunds"
    assert any("answered from the lexical lane" in n for n in r.notes)
    assert r.to_json()["degraded"] is True
    assert set(r.hits[0].lanes) == {"lexical"}
    kb.close()


def test_context_fits_the_budget_and_cites(kb):
    long = [
        _doc(f"mem://long{i}", f"Long {i}", [" ".join(["Refunds are processed in batches every night."] * 40)])
        for i in range(5)
    ]
    _write(kb, "ctx", long + DOCS)
    from kbctl.search.context import format_context

    r = kb.search("refunds processed", "ctx", k=10)
    for budget in (60, 300, 2000):
        block = format_context(r, budget)
        assert estimate_tokens(block) <= budget + 4
        assert block.startswith("[1] ")
    assert format_context(r, 2000).count("\n[") >= 2


def test_per_doc_and_explain(kb):
    long = _doc(
        "mem://manual",
        "Manual",
        [f"Section {i}: refunds are handled by the billing team, case {i}." * 6 for i in range(12)],
    )
    _write(kb, "shape", [long] + DOCS)
    many = kb.search("refunds billing team", "shape", mode="hybrid", k=10)
    assert sum(h.source == "mem://manual" for h in many.hits) > 1
    one = kb.search("refunds billing team", "shape", mode="hybrid", k=10, per_doc=1)
    assert sum(h.source == "mem://manual" for h in one.hits) == 1
    for h in one.hits:
        assert set(h.lanes) == {"dense", "lexical"}
        assert any(v["rank"] is not None for v in h.lanes.values())


def test_cli_context_and_markdown_formats(cli, kb):
    _write(kb, "fmt", DOCS)
    p = cli("search", "refunds", "-n", "fmt", "--format", "context", "--budget", "100", check=True)
    out = p.stdout.decode()
    assert out.startswith("[1] Refunds") and estimate_tokens(out) <= 104
    p = cli("search", "refunds", "-n", "fmt", "--jsonl", check=True)
    rows = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert rows[0]["rank"] == 1 and "citation" in rows[0]
    p = cli("search", "", "-n", "fmt", "--filter", "tags=auth", "--json", check=True)
    d = json.loads(p.stdout)
    assert d["strategy"] == "metadata" and [h["score"] for h in d["hits"]] == [None]
    p = cli("search", "", "-n", "fmt", "--json", check=True)
    assert json.loads(p.stdout)["strategy"] == "no_match"
