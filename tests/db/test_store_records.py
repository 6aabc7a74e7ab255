"""``kbctl store`` of hand-made embedded records: a record that would leave the namespace failing
verify (a document without chunks, a parent that is not there, an empty uri, a
NUL in a chunk's text) is a failed item of the run, with its reason, and the rest goes in. Such records
were stored, and ``kbctl verify`` then failed on the namespace for good."""

from __future__ import annotations

import json

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
