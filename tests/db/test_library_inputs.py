"""What a Python caller hands the library's verbs: one target given as a string (not its
characters, one of which is ``/``), and values of the wrong type, each a kbctl ``UsageError``
naming the input, never Python's ``TypeError`` or ``ValueError`` from deep inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbctl.errors import KbctlError, UsageError
from tests.conftest import write_folder

DOCS = {"refunds.md": "# Refunds\n\nRefunds take five business days.\n"}


@pytest.mark.parametrize("as_path", [False, True])
def test_one_target_given_as_a_string_or_path_is_that_target(kb, tmp_path, monkeypatch, as_path):
    # relative, so that before the fix its characters named nothing (``/``, one of an absolute
    # path's, is the root: the whole file system was walked into the namespace)
    monkeypatch.chdir(tmp_path)
    folder = write_folder(Path("."), "billing", DOCS)
    report = kb.ingest(Path(folder) if as_path else folder, "billing", verify=False)
    assert report.documents["new"] == 1 and report.documents["failed"] == 0
    assert [r["type"] for r in kb.records.fetch(folder)] == ["source"]


@pytest.mark.parametrize("targets", [5, [None], ["ok", 3], b"/tmp"])
def test_targets_of_another_type_are_a_usage_error(kb, targets):
    with pytest.raises(UsageError, match="target"):
        kb.ingest(targets, "billing")
    assert kb.namespaces() == []  # nothing was made for the refused run


def test_search_inputs_of_the_wrong_type_are_usage_errors(kb, tmp_path):
    kb.ingest([write_folder(tmp_path, "billing", DOCS)], "billing", verify=False)
    bad = [
        lambda: kb.search(None, "billing"),
        lambda: kb.search(5, "billing"),
        lambda: kb.search("refund", 5),
        lambda: kb.search("refund", ["billing", 5]),
        lambda: kb.document("abc", ["billing"]),
        lambda: kb.document(None, ["billing"]),
        lambda: kb.chunk("abc", ["billing"]),
    ]
    for call in bad:
        with pytest.raises(UsageError) as caught:
            call()
        assert isinstance(caught.value, KbctlError) and caught.value.hint


def test_a_document_read_takes_one_namespace_as_a_string(kb, tmp_path):
    kb.ingest([write_folder(tmp_path, "billing", DOCS)], "billing", verify=False)
    hit = kb.search("refunds", "billing").hits[0]
    assert kb.document(hit.doc_id, "billing")["doc_id"] == hit.doc_id == kb.document(hit.doc_id, ["billing"])["doc_id"]


def test_a_namespace_named_twice_is_searched_and_reported_once(kb, tmp_path):
    """``kbctl search -n a -n a`` (``kb.search(q, ["a", "a"])``) searched ``a`` once but reported
    ``"namespace": ["a", "a"]``: a name given twice is one namespace, in the order first given."""
    kb.ingest([write_folder(tmp_path, "a", {"x.md": "# Refunds\n\nRefunds take five days."})], "a", verify=False)
    kb.ingest([write_folder(tmp_path, "b", {"y.md": "# Shipping\n\nShipping takes two days."})], "b", verify=False)
    twice = kb.search("refunds", ["a", "a"])
    assert twice.namespaces == ("a",) and [h.chunk_id for h in twice.hits] == [
        h.chunk_id for h in kb.search("refunds", "a").hits
    ]
    assert kb.search("days", ["b", "a", "b"]).namespaces == ("b", "a")
