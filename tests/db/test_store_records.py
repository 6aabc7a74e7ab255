"""``kbctl store`` of hand-made embedded records: a record that would leave the namespace failing
verify (a document without chunks, a parent that is not there, an empty uri, a
NUL in a chunk's text) is a failed item of the run, with its reason, and the rest goes in. Such records
were stored, and ``kbctl verify`` then failed on the namespace for good."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbctl.ingest.stages import read_records, store_items


def _record(uri: str, text: str = "hello world about refunds", **doc) -> dict:
    document = {"uri": uri, "title": "t", "text": text, "blocks": [], "source_type": "text", "metadata": {}, **doc}
    chunk = {"document_uri": uri, "position": 0, "text": text, "token_count": 4, "char_start": 0, "char_end": len(text)}
    return {
        "type": "embedded",
        "source_uri": uri,
        "source_sha": "sha-" + uri,
        "source_kind": "file",
        "document": document,
        "chunks": [chunk],
        "embeddings": [[0.05] * 384],
    }


def _bad(kind: str) -> dict:
    rec = _record(f"file:///bad-{kind}.md")
    if kind == "no-chunks":
        rec["chunks"], rec["embeddings"] = [], []
    elif kind == "orphan":
        rec["document"]["parent_uri"] = "file:///nowhere.md"
    elif kind == "empty-uri":
        rec = _record("")
    elif kind == "nul":
        rec["chunks"][0]["text"] = "a\u0000b"
    return rec


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("no-chunks", "has no chunks"),
        ("orphan", "parent"),
        ("empty-uri", "empty"),
        ("nul", "NUL"),
    ],
)
def test_a_record_that_would_break_the_store_is_a_failed_item(kb, kind, reason):
    good = _record(f"file:///good-{kind}.md")
    lines = [json.dumps(r) for r in (_bad(kind), good)]
    prof = kb.settings.profile("hash-384")
    ns = f"rec-{kind}"
    report = kb.store(store_items(read_records(lines), prof), ns)
    assert report.documents["new"] == 1 and report.documents["failed"] == 1, report.to_json()
    assert any(reason in e.message for e in report.errors), report.errors
    assert kb.verify(ns).ok


def test_no_records_into_a_new_namespace_store_nothing_and_create_nothing(cli, kb):
    """``kbctl store -n NEW`` with nothing on stdin made NEW (empty, pinned to the profile given)
    and a run of nothing in its ledger. Nothing to store now makes nothing: exit 0, as ``kbctl
    ingest`` of an empty folder; an existing namespace still gets its (empty) run."""
    p = cli("-p", "hash-384", "store", "-n", "never_made", input=b"")
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["documents"]["new"] == 0
    assert "nothing to store" in p.stderr.decode()
    assert "never_made" not in kb.namespace_names()
    assert cli("runs", "--json", check=True).stdout.strip() == b"[]"
    kb.create_namespace("kept", "hash-384")
    p = cli("-p", "hash-384", "store", "-n", "kept", input=b"")
    assert p.returncode == 0, p.stderr.decode()
    assert "kept" in kb.namespace_names() and json.loads(p.stdout)["run_id"] is not None


def test_embed_into_a_new_namespace_reuses_the_vectors_the_tenant_holds_for_its_profile(kb, monkeypatch):
    """``kbctl embed -n NEW`` (a namespace not created yet) embedded every chunk with the model,
    though the tenant's other namespaces held vectors of the same profile for the same chunk texts
    and the ``kbctl ingest``/``store`` that follows reuses them: the stage looked the cache up only
    through an existing namespace. It looks it up as a plan does (``kb.namespaces.placeholder``)."""
    from kbctl.ingest import embedding

    folder = str(Path(__file__).parents[2] / "sample_corpus" / "engineering" / "releases")
    kb.ingest([folder], namespace="first", verify=False)
    chunked = list(kb.chunk_records(_lines(kb.extract_records(_lines(kb.fetch_records([folder])))), profile="hash-384"))
    texts: list[str] = []
    embed = embedding.Embedding.embed

    def counted(self, missing):
        texts.extend(missing.values())
        return embed(self, missing)

    monkeypatch.setattr(embedding.Embedding, "embed", counted)
    out = list(kb.embed_records(_lines(chunked), namespace="second"))
    assert [r["type"] for r in out] == ["embedded"] * len(chunked)
    assert texts == []  # every vector from the tenant's embed cache
    assert "second" not in kb.namespace_names()  # the stage made nothing
    again = list(kb.embed_records(_lines(chunked), namespace="first"))
    assert [r["embeddings"] for r in out] == [r["embeddings"] for r in again]
    kb.delete_namespace("first")
    assert list(kb.embed_records(_lines(chunked), namespace="second")) == out
    assert len(texts) == sum(len(r["chunks"]) for r in chunked)  # nothing left to reuse: the model


def _lines(records) -> list[str]:
    return [json.dumps(r) for r in records]


def test_embed_with_another_profile_than_the_namespace_s_gives_that_profile_s_vectors(kb_home, tenant, tmp_path):
    """``kbctl embed -n NS -p OTHER`` embedded with OTHER but looked the cache up under NS's own
    profile: the chunks NS stores came out with NS's vectors (384-d from a 256-d profile; of the same
    size, another model's vectors, which ``kbctl store -p OTHER`` then stored as OTHER's)."""
    import kbctl

    (tmp_path / "kbctl.toml").write_text(
        '[profiles.h256]\nembedder = "hash"\nmodel = "hash"\ndimension = 256\n\n'
        '[profiles.h384b]\nembedder = "hash"\nmodel = "hash"\ndimension = 384\nrevision = "b"\n'
    )
    folder = str(Path(__file__).parents[2] / "sample_corpus" / "engineering" / "releases")
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384", config=tmp_path / "kbctl.toml") as kb:
        kb.ingest([folder], namespace="first", verify=False)
        for name, dim in (("h256", 256), ("h384b", 384)):
            chunked = _lines(
                kb.chunk_records(_lines(kb.extract_records(_lines(kb.fetch_records([folder])))), profile=name)
            )
            fresh = list(kb.embed_records(chunked, profile=name))  # no namespace: the model's
            out = list(kb.embed_records(chunked, namespace="first", profile=name))
            assert {len(e) for r in out for e in r["embeddings"]} == {dim}
            assert [r["embeddings"] for r in out] == [r["embeddings"] for r in fresh], name
