"""``kbctl namespaces delete NS`` while an ingest writes into NS: the delete takes the namespace's
write lock (a batch being written lands wholly before it and goes with it), and the ingest ends with
one clear error that says the namespace was deleted, never that it moved to another generation."""

from __future__ import annotations

import pytest

import kbctl
import kbctl.ingest.pipeline as pipeline
import kbctl.ingest.writer as writer
from kbctl.errors import NamespaceNotFound


@pytest.mark.parametrize(
    "where",
    [
        (writer, "write_documents"),  # before a batch's write: it finds the namespace gone
        (pipeline, "_after"),  # after the run's last write: its end finds it gone
    ],
    ids=["batch", "end"],
)
def test_an_ingest_whose_namespace_is_deleted_under_it_says_the_namespace_was_deleted(
    kb_home, tenant, monkeypatch, where
):
    records = [{"id": str(i), "title": str(i), "text": f"a refund policy number {i}"} for i in range(3)]
    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as other,
    ):
        k.ingest_records(records[:1], "docs", verify=False)
        module, name = where
        original = getattr(module, name)
        deleted: list[int] = []

        def delete_first(*args, **kwargs):
            if not deleted:
                deleted.append(other.delete_namespace("docs"))  # `kbctl namespaces delete docs`, another process
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, delete_first)
        with pytest.raises(NamespaceNotFound) as e:
            k.ingest_records(records, "docs", verify=False)
        monkeypatch.undo()
        assert deleted == ([1] if name == "write_documents" else [3])  # the end: all it wrote went
        assert e.value.message == "namespace 'docs' was deleted while this run wrote to it; nothing more was written"
        assert "generation" not in e.value.message and "generation" not in (e.value.hint or "")
        assert e.value.exit_code == 2
        assert [n["name"] for n in other.namespaces()] == []  # the ingest did not make it again
