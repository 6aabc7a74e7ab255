"""``kbctl namespaces delete NS`` while ``kbctl reembed NS --profile …`` builds its shadow
generation: the build ends with one clear error that says the namespace was deleted (a
``NamespaceNotFound``, exit 2), never a database error or that a generation was dropped."""

from __future__ import annotations

import pytest

import kbctl
import kbctl.ingest.reembed as reembed
import kbctl.store.generations as gstore
from kbctl.errors import NamespaceNotFound
from kbctl.store.generations import hnsw_index_name


@pytest.mark.parametrize(
    "where",
    [
        (reembed, "start_shadow"),  # before the shadow is made: it finds the namespace gone
        (gstore, "write_vectors"),  # before a batch's write
        (gstore, "ensure_index"),  # after the last batch: the index of a generation that went with it
    ],
    ids=["start", "batch", "index"],
)
def test_a_reembed_whose_namespace_is_deleted_under_it_says_the_namespace_was_deleted(
    kb_home, tenant, monkeypatch, where
):
    records = [{"id": str(i), "title": str(i), "text": f"a refund policy number {i}"} for i in range(5)]
    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as other,
    ):
        k.ingest_records(records, "docs", verify=False)
        module, name = where
        original = getattr(module, name)
        deleted: list[int] = []
        built: list[int] = []

        def delete_first(*args, **kwargs):
            if name == "ensure_index":
                built.append(args[1].id)
            if not deleted:
                deleted.append(other.delete_namespace("docs"))  # `kbctl namespaces delete docs`, another process
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, delete_first)
        with pytest.raises(NamespaceNotFound) as e:
            k.reembed("docs", "hash-384", storage="halfvec", batch=2)
        monkeypatch.undo()
        assert deleted == [5]
        assert (
            e.value.message
            == "namespace 'docs' was deleted while this reembed built its vectors; nothing more was written"
        )
        assert "kbctl namespaces delete docs" in (e.value.hint or "")
        assert e.value.exit_code == 2
        assert [n["name"] for n in other.namespaces()] == []
        for gid in built:  # an index built for the generation after its namespace's delete is dropped
            index = f"kbctl.{hnsw_index_name(gid)}"
            assert other.connection().execute("SELECT to_regclass(%s)", (index,)).fetchone() == (None,)


def test_the_cli_says_the_namespace_was_deleted_in_one_line(cli, kb_home, tenant, monkeypatch):
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
        k.ingest_records([{"id": "1", "title": "1", "text": "a refund"}], "docs", verify=False)
    original = gstore.write_vectors

    def delete_first(*args, **kwargs):
        with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as other:
            other.delete_namespace("docs")
        return original(*args, **kwargs)

    monkeypatch.setattr(gstore, "write_vectors", delete_first)
    p = cli("reembed", "docs", "--profile", "hash-384", "--storage", "halfvec")
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert err.splitlines()[0] == (
        "error: namespace 'docs' was deleted while this reembed built its vectors; nothing more was written"
    )
    assert err.splitlines()[1].startswith("hint: ") and len(err.splitlines()) == 2
    assert "Traceback" not in err and p.stdout == b""
