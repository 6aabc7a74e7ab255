"""The benchmarks' scaled namespaces (``bench/scale.py``) are made as the library works: on the
store's connection, which acts as the tenant's role under row-level security, with what only the
tables' owner may do going through the library's owner paths. So the latency, dense and prf parts run
on a fresh home, where kbctl connects as the owner and acts as the tenant (``python bench/run.py
--smoke`` runs every part in CI; this is the part of it that needs no model).
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT, TEST_DSN

sys.path.insert(0, str(ROOT / "bench"))


def _ingest(kb, folder, namespace: str, texts: list[str]) -> str:
    """One Markdown file per text, ingested into ``namespace``."""
    folder.mkdir()
    for i, text in enumerate(texts):
        (folder / f"doc-{i}.md").write_text(f"# Document {i}\n\n{text}\n")
    kb.ingest([str(folder)], namespace=namespace, verify=False)
    return namespace


@pytest.fixture
def source(kb, tmp_path):
    notes = [f"Refunds take {i + 2} business days; invoices close monthly." for i in range(6)]
    return _ingest(kb, tmp_path / "docs", "src", notes)


def test_a_namespace_is_scaled_by_the_tenant_role_with_its_index_built_after(kb, source):
    import scale

    from kbctl.store.generations import hnsw_index_name

    conn = kb.connection()
    assert conn.execute("SELECT current_user <> session_user").fetchone()[0]  # acting as the tenant
    info = scale.make_scaled(kb, source, "scale-10k", 40)
    assert info["chunks"] == 40 and not info["reused"]
    ns = kb.namespace("scale-10k")
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %(n)s),"
        " (SELECT count(*) FROM kbctl.vectors WHERE namespace_id = %(n)s),"
        " (SELECT chunk_count FROM kbctl.lexical_stats WHERE namespace_id = %(n)s),"
        " (SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %(n)s AND metadata->>'bench_slice' = 'yes')",
        {"n": ns.id},
    ).fetchone()
    assert counts == (40, 40, 40, 2)
    valid = conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
        (hnsw_index_name(ns.generation_id),),
    ).fetchone()
    assert valid == (True,)
    hits = kb.search("refunds business days", "scale-10k", mode="hybrid", k=5).hits
    assert len(hits) == 5
    assert scale.make_scaled(kb, source, "scale-10k", 40)["reused"]


def test_the_latency_part_prepares_its_namespaces_and_optimizes_as_the_owner(kb, tmp_path):
    import latency
    from common import Env

    _ingest(kb, tmp_path / "claims", "scifact", [f"Vitamin D {i} lowers the risk of fractures." for i in range(4)])
    infos = latency.prepare(kb, Env(tmp_path, tmp_path, smoke=True, scale=(10, 20)))
    assert [(i["namespace"], i["chunks"]) for i in infos] == [("scale-10k", 10), ("scale-100k", 20)]
    if not TEST_DSN:  # the warm-up reads the embedded server's data directory; a server by DSN has none here
        assert latency.warm_page_cache(kb)["warmed_mb"] > 0
