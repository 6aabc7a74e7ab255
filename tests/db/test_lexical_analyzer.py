"""The lexical lane on Chinese, Japanese and Korean text, through ingest and search.

A namespace records the analyzer version its postings were made with: a new one gets CJK bigrams
(a word inside a sentence is found), one recorded before (version 1, what migration 019 gives the
namespaces that exist) keeps the old tokenization for its writes and its queries, and says how to
rebuild it when a query would need the new one.
"""

from __future__ import annotations

import pytest

from tests.conftest import write_folder

DOCS = {
    "beijing.md": "# 北京\n\n北京大学的图书馆很大，藏书丰富。学生每天在那里学习。\n",
    "tokyo.md": "# 研究\n\n東京大学で機械学習を研究しています。新しいデータベースを作りました。\n",
    "seoul.md": "# 서울\n\n서울은 한국의 수도입니다. 인구가 많습니다.\n",
    "refunds.md": "# Refunds\n\nRefunds are processed within five business days; see LMN-4012.\n",
}


def _folder(tmp_path):
    return write_folder(tmp_path, "cjk", DOCS)


def _top(kb, query, ns):
    hits = kb.search(query, ns, mode="lexical").hits
    return hits[0].source.rsplit("/", 1)[-1] if hits else None


def test_a_word_inside_a_cjk_sentence_is_found_by_the_lexical_lane(kb, tmp_path):
    kb.ingest([_folder(tmp_path)], namespace="multi")
    assert kb.namespaces.get("multi").analyzer == 2
    assert {r["name"]: r["analyzer"] for r in kb.namespaces()} == {"multi": 2}  # kbctl namespaces shows it
    assert _top(kb, "图书馆", "multi") == "beijing.md"
    assert _top(kb, "藏书", "multi") == "beijing.md"
    assert _top(kb, "機械学習", "multi") == "tokyo.md"
    assert _top(kb, "データベース", "multi") == "tokyo.md"
    assert _top(kb, "한국", "multi") == "seoul.md"
    assert _top(kb, "인구", "multi") == "seoul.md"
    assert _top(kb, "LMN-4012", "multi") == "refunds.md"
    r = kb.search("图书馆", "multi", mode="lexical")
    assert not any("rebuild" in n for n in r.notes), r.notes


def _old_namespace(kb, name):
    """A namespace as it was before migration 019: recorded at analyzer version 1."""
    ns = kb.namespaces.create(name)
    kb.connection().execute("UPDATE kbctl.namespaces SET analyzer = 1 WHERE id = %s", (ns.id,))
    assert kb.namespaces.get(name).analyzer == 1


def test_a_namespace_recorded_at_version_1_keeps_its_tokenization_and_says_how_to_rebuild(kb, tmp_path):
    _old_namespace(kb, "old")
    kb.ingest([_folder(tmp_path)], namespace="old")
    ns = kb.namespaces.get("old")
    assert ns.analyzer == 1 and {r["name"]: r["analyzer"] for r in kb.namespaces()} == {"old": 1}
    terms = {
        t
        for (t,) in kb.connection().execute("SELECT term FROM kbctl.lexical_postings WHERE namespace_id = %s", (ns.id,))
    }
    assert "北京大学的图书馆很大" in terms and "图书" not in terms  # written as version 1 writes
    assert _top(kb, "北京大学的图书馆很大", "old") == "beijing.md"  # queried as before: the whole run
    assert _top(kb, "图书馆", "old") is None
    assert _top(kb, "refunds", "old") == "refunds.md"
    r = kb.search("图书馆", "old", mode="lexical")
    (note,) = [n for n in r.notes if "rebuild" in n]
    assert "'old'" in note and "kbctl ingest" in note, note
    assert not any("rebuild" in n for n in kb.search("refunds", "old", mode="lexical").notes)


@pytest.fixture
def both_versions(kb, tmp_path):
    """Namespace ``before`` at analyzer version 1 and ``after`` at version 2, both holding a
    ``beijing.md`` with "北京大学的图书馆很大" (``after`` the folder of ``DOCS``)."""
    _old_namespace(kb, "before")
    old = tmp_path / "old"
    old.mkdir()
    # not the same text as the new namespace's (a near-duplicate of a hit would be shaped away)
    (old / "beijing.md").write_text("# 北京\n\n北京大学的图书馆很大，开放时间很长。\n", encoding="utf-8")
    kb.ingest([str(old)], namespace="before")
    kb.ingest([_folder(tmp_path)], namespace="after")


@pytest.mark.usefixtures("both_versions")
def test_a_search_of_namespaces_of_both_versions_reads_each_with_its_own_terms(kb):
    word = {
        (h.namespace, h.source.rsplit("/", 1)[-1])
        for h in kb.search("图书馆", ["before", "after"], mode="lexical").hits
    }
    assert ("after", "beijing.md") in word and ("before", "beijing.md") not in word
    run = {
        (h.namespace, h.source.rsplit("/", 1)[-1])
        for h in kb.search("北京大学的图书馆很大", ["before", "after"], mode="lexical").hits
    }
    assert {("after", "beijing.md"), ("before", "beijing.md")} <= run


@pytest.mark.usefixtures("both_versions")
def test_a_search_of_both_versions_does_not_correct_a_cjk_run_into_a_bigram(kb):
    """Over namespaces of both versions a query's CJK run is a version-1 term and its bigrams are
    version-2 terms. The run, absent from the old namespace's vocabulary, was taken for a misspelling
    and "corrected" to one of its own bigrams of the new one (two edits away): a note told the user
    "学生每天 → 学生", and that bigram counted twice in the query."""
    r = kb.search("学生每天", ["before", "after"], mode="lexical")
    assert not any(n.startswith("corrected") for n in r.notes), r.notes
    assert r.hits and r.hits[0].source.endswith("beijing.md") and r.hits[0].namespace == "after"
    # a misspelled English word is still corrected in such a search
    assert any("refundz → refund" in n for n in kb.search("refundz", ["before", "after"], mode="lexical").notes)
