"""The library by nouns (``kbctl/api/``): the facade keeps every verb it had, a namespace handle,
the sub-APIs, the agent tools as library calls, and the README's example run as written."""

from __future__ import annotations

import inspect
import re

import pytest

import kbctl
from kbctl.api import KnowledgeBase, NamespaceHandle, Session
from kbctl.errors import KnowledgeBaseClosed
from tests.conftest import ROOT, SAMPLE

# Every public method of KnowledgeBase before it was split into sub-APIs (kbctl/api.py at f9966c7),
# but serve, serve_stdio and search_via_server: the library no longer imports its agent server
# (kbctl.server.serve_http / serve_stdio, and kbctl.server.client.forward_search, are those calls).
FACADE = """
agent_of_token audit bind_namespace chunk_records close compare_generations config_report connection context
create_agent_token create_namespace create_tenant db_status delete_namespace delete_tenant document drop_generation
dsn embed_records errors evaluate extract_records fetch_records generations import_beir import_feedback ingest
ingest_records log_query migrate namespace namespace_names namespaces optimize passage_vectors
passage_vectors_and_profiles principal profile_for prune_audit record_feedback reembed retriever revoke_agent_tokens
rollback_generation runs search start_server stats stop_server store store_records swap_generation sweep tenants
verify
""".split()


def test_the_facade_keeps_every_verb_with_its_signature_and_docstring(kb):
    missing = [name for name in FACADE if not callable(getattr(kb, name, None))]
    assert not missing, missing
    # a delegate carries the sub-API's signature and docstring (help(kb.search) reads as before)
    assert "principal" in inspect.signature(KnowledgeBase.search).parameters
    assert KnowledgeBase.evaluate.__doc__ and "gates" in KnowledgeBase.evaluate.__doc__
    assert KnowledgeBase.evaluate.__qualname__ == "Evals.evaluate"  # written once, there


def test_the_api_imports_neither_the_server_nor_the_cli():
    import grimp

    graph = grimp.build_graph("kbctl", cache_dir=None)
    for adapter in ("kbctl.server", "kbctl.cli"):
        chains = graph.find_shortest_chains(importer="kbctl.api", imported=adapter, as_packages=True)
        assert not chains, f"kbctl.api reaches {adapter}: {chains}"


def test_the_server_reads_no_private_of_the_library():
    """``kbctl.server`` holds knowledge bases and their public ``Session``; it reads no ``kb._x``."""
    private = re.compile(r"\b(kb|session|self\.kb)\._[a-z]")
    for path in sorted((ROOT / "kbctl" / "server").glob("*.py")):
        found = [line for line in path.read_text().splitlines() if private.search(line)]
        assert not found, f"{path.name}: {found}"


def test_a_handle_per_namespace(kb):
    billing = kb["billing_kb"]
    assert isinstance(billing, NamespaceHandle) and billing.name == "billing_kb" and not billing.exists()
    report = billing.ingest(str(SAMPLE / "support" / "billing"), verify=False)
    assert report.documents["new"] > 0 and billing.exists()
    assert billing.info().name == "billing_kb" and billing.info().profile_name == "hash-384"
    result = billing.search("refund", k=2, mode="lexical")
    assert result.namespaces == ("billing_kb",) and len(result.hits) == 2
    assert result.to_json()["hits"] == kb.search("refund", "billing_kb", k=2, mode="lexical").to_json()["hits"]
    assert billing.verify().ok
    assert [g["state"] for g in billing.generations()] == ["active"]
    assert billing.runs(limit=1)[0]["namespace"] == "billing_kb" and billing.errors() == []
    assert billing.retriever(k=1)("refund").hits[0].namespace == "billing_kb"
    assert kb.namespaces["billing_kb"].name == "billing_kb"


def test_sub_apis_list_when_called_and_hold_the_verbs(kb):
    kb["one_kb"].create()
    assert [n["name"] for n in kb.namespaces()] == ["one_kb"] == kb.namespaces.names()
    assert kb.generations("one_kb")[0]["state"] == "active"
    assert kb.tenant in [t["name"] for t in kb.tenants()]
    assert kb.admin.stats()["tenant"] == kb.tenant
    assert isinstance(kb.session, Session) and kb.session.tenant == kb.tenant
    assert kb.session.open_connections()  # the facade's calls went through it
    assert kb.namespaces.delete("one_kb") == 0 and kb.namespaces() == []
    kb.close()
    assert kb.session.open_connections() == []
    with pytest.raises(KnowledgeBaseClosed):  # the sub-APIs are the handle's verbs: closed with it
        kb.namespaces()


def test_verify_claim_and_research_are_library_calls(kb):
    kb.ingest([str(SAMPLE / "support" / "billing")], "billing_kb", verify=False)
    check = kb.verify_claim("Refunds go back to the original payment method", "billing_kb", k=3)
    assert len(check.result.hits) == len(check.signals) == 3
    assert check.key_terms[:2] == ["refunds", "go"]  # words (one per stem), no stopwords, in order
    assert check.thresholds == {"dense_similarity": 0.53, "key_terms_found": 0.45}
    for s in check.signals:
        assert s["supports"] == (s["dense_similarity"] >= 0.53 and s["key_terms_found"] >= 0.45)
    assert check.evidence_found == any(s["supports"] for s in check.signals)
    strict = kb.verify_claim("Refunds go back to the original payment method", "billing_kb", k=3, min_terms=1.01)
    assert not strict.evidence_found
    found = kb["billing_kb"].research("failed payments", budget=600)
    assert found.result.hits and found.documents and len(found.sub_queries) <= 3
    assert all(q.startswith("failed payments ") for q in found.sub_queries)


def test_key_terms_match_on_the_lexical_analyzers_stems():
    """The one analyzer: "refunds" matches "refunded" (Snowball), stopwords are textutil's."""
    from kbctl.search.evidence import evidence_signals, key_terms
    from kbctl.textutil.analyze import get_analyzer
    from kbctl.types import Hit

    a = get_analyzer("english")
    terms = key_terms("Were the refunds processed by the payments team?", a)
    assert terms == ["refunds", "processed", "payments", "team"]
    hit = Hit(1, 0.5, 1, 1, "s", "Billing", "We refunded it; processing takes days.", "ns", {}, "c", {})
    assert evidence_signals(hit, terms, a)["matched_terms"] == ["refunds", "processed"]


def test_the_readme_python_example_runs(kb, monkeypatch):
    """README "Quick start": the handle example, run as written (on this test's tenant, hash profile)."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (example,) = [b for b in blocks if 'kb["billing_kb"]' in b]
    monkeypatch.setattr(kbctl, "open", lambda **_: kb)
    monkeypatch.chdir(ROOT)
    exec(compile(example, "README.md", "exec"), {})


@pytest.mark.parametrize("name", ["evaluate", "sweep", "import_beir"])
def test_the_eval_verbs_are_written_once(name):
    from kbctl.api.evals import Evals

    assert inspect.unwrap(getattr(KnowledgeBase, name)) is inspect.unwrap(getattr(Evals, name))


def test_research_of_a_chinese_topic_makes_sub_queries(kb, tmp_path):
    """Feedback terms of Chinese passages are CJK bigrams (the analyzer's unit), so research of a
    Chinese topic searches further; the Latin length rule (> 3 characters) left it none."""
    d = tmp_path / "zh"
    d.mkdir()
    for i, text in enumerate(
        [
            "北京大学的图书馆很大，学生可以借阅图书。",
            "图书馆每天开放，借阅需要学生证。",
            "学生在图书馆借阅了很多书，也在那里复习。",
            "大学食堂的饭菜便宜，学生很多。",
        ]
    ):
        (d / f"{i}.md").write_text(f"# 第{i}篇\n\n{text}\n", encoding="utf-8")
    kb.ingest([str(d)], "zh", verify=False)
    found = kb["zh"].research("图书馆", budget=600)
    assert found.feedback_terms and all(len(t) == 2 for t in found.feedback_terms), found.feedback_terms
    assert found.sub_queries and all(q.startswith("图书馆 ") for q in found.sub_queries)
    assert len(found.sub_results) == len(found.sub_queries)
