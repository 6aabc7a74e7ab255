"""`kbctl eval` as a CI job runs it: what it is given wrong is refused in one line (exit 2) before
any query is searched or anything is written, and never as a traceback.

A gate must name a mode the run searches and a metric it computes (a gate that could not be
checked would otherwise fail only after the whole run, or never); `eval sweep`'s metric and grid
are read before its first search; `eval import` of a folder without a corpus makes neither the
tenant nor the namespace.
"""

from __future__ import annotations

import json

import pytest

from kbctl.errors import UsageError
from kbctl.search.engine import SearchOptions
from tests.conftest import ROOT

TINY = ROOT / "tests" / "fixtures" / "eval" / "beir_tiny"
GOLDEN = ROOT / "sample_corpus" / "eval" / "queries.jsonl"


def _one_error(p, *needles: str) -> str:
    """The error line of a usage error (exit 2): one line, its hint, no traceback."""
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], err
    assert "hint:" in err, err
    assert p.stdout == b""
    return lines[0]


def test_a_gate_naming_a_mode_the_run_does_not_search_is_refused_before_any_search(cli):
    # namespace 'nosuch' does not exist: the gate is read first, so its error is the one said
    p = cli("eval", "run", str(TINY), "-n", "nosuch", "--modes", "lexical", "--fail-under", "dense:ndcg@10=0.5")
    line = _one_error(p, "dense:ndcg@10>=0.5", "'dense'")
    assert "nosuch" not in line
    assert "--modes" in p.stderr.decode()
    p = cli("eval", "run", str(TINY), "-n", "nosuch", "--modes", "lexical", "--fail-under", "hybird:ndcg@10=0.5")
    _one_error(p, "'hybird'")


def test_a_gate_on_a_metric_the_run_does_not_compute_is_refused_before_any_search(cli):
    for gate, k in (("p@5=0.1", "10"), ("recall@1000=0.1", "10"), ("precision@10=0.1", "10")):
        p = cli("eval", "run", str(TINY), "-n", "nosuch", "--modes", "lexical", "-k", k, "--fail-under", gate)
        line = _one_error(p, gate.split("=")[0])
        assert "nosuch" not in line
    # a BEIR folder judges no passages: a passage gate could never be checked
    p = cli("eval", "run", str(TINY), "-n", "nosuch", "--modes", "lexical", "--fail-under", "passage_mrr@10=0.1")
    _one_error(p, "passage_mrr@10")
    # the golden set judges passages, so the same gate is read, and -k changes which p@K is computed
    p = cli("eval", "run", str(GOLDEN), "-n", "nosuch", "--modes", "lexical", "-k", "5", "--fail-under", "p@5=0.1")
    _one_error(p, "namespace '", "does not exist")


def test_sweep_refuses_a_metric_it_cannot_rank_by_before_any_search(cli):
    for metric in ("bogus@10", "p@5", "passage_mrr@10"):
        p = cli("eval", "sweep", str(TINY), "-n", "nosuch", "--metric", metric)
        line = _one_error(p, metric)
        assert "nosuch" not in line


def test_sweep_refuses_a_grid_it_cannot_read(cli):
    for option, value, needle in (
        ("--rrf-k", "abc", "--rrf-k"),
        ("--candidates", "10,x", "--candidates"),
        ("--dense-weight", "half", "--dense-weight"),
        ("--ef-search", "1.5", "--ef-search"),
        ("--rrf-k", "", "--rrf-k"),
        ("--fusion", " , ", "--fusion"),
    ):
        p = cli("eval", "sweep", str(TINY), "-n", "nosuch", option, value)
        _one_error(p, needle)


def test_sweep_refuses_a_grid_value_a_search_would_not_take_before_any_search(cli):
    """``--rrf-k 0`` was swept as if it were a setting (a search option of 0 meant "the profile's
    rrf_k", so the row labelled 0 was the profile's); each grid value is checked as the search
    option is (rrf_k at least 1, candidates and ef_search 1..1000, a weight in 0..1), naming the flag."""
    for option, value, needle in (
        ("--rrf-k", "0", "at least 1"),
        ("--rrf-k", "30,0", "at least 1"),
        ("--candidates", "0", "1..1000"),
        ("--ef-search", "1001", "1..1000"),
        ("--dense-weight", "1.5", "0..1"),
    ):
        p = cli("eval", "sweep", str(TINY), "-n", "nosuch", option, value)
        _one_error(p, option, needle)
    with pytest.raises(UsageError, match="rrf_k must be at least 1"):
        SearchOptions(rrf_k=0)


def test_import_of_a_folder_without_a_corpus_makes_neither_tenant_nor_namespace(cli, tenant, tmp_path):
    fresh = f"{tenant}_imp"[:60]
    (tmp_path / "qrels").mkdir()
    for missing in (tmp_path / "nowhere", tmp_path):
        p = cli("eval", "import", str(missing), "-n", "docs", tenant_override=fresh)
        _one_error(p, "corpus.jsonl")
    p = cli("tenants", "--json")
    assert p.returncode == 0, p.stderr.decode()
    names = {row["name"] for row in json.loads(p.stdout)}
    assert fresh not in names, names


def test_k_and_depth_out_of_range_are_refused_naming_their_flag_before_any_search(cli):
    """`--depth 100000` said `k (-k) must be in 1..1000` (the search's -k, at the first query)."""
    for args, needle in ((("--depth", "100000"), "--depth"), (("--depth", "0"), "--depth"), (("-k", "0"), "-k")):
        p = cli("eval", "run", str(TINY), "-n", "nosuch", "--modes", "lexical", *args)
        line = _one_error(p, f"{needle} must be", "1..1000")
        assert "nosuch" not in line


@pytest.fixture
def golden_of_two_namespaces(cli, tmp_path):
    """beir_tiny imported as namespace 'tiny' and a golden set whose first query searches it and
    whose last searches namespace 'nosuch', which does not exist."""
    p = cli("-p", "hash-384", "eval", "import", str(TINY), "-n", "tiny")
    assert p.returncode == 0, p.stderr.decode()
    golden = tmp_path / "golden.jsonl"
    rows = [
        {"id": "q1", "query": "how long do refunds take", "namespace": "tiny", "relevant": ["d1"]},
        {"id": "q2", "query": "change my annual plan", "namespace": "tiny", "relevant": ["d2"]},
        {"id": "q3", "query": "change my annual plan", "namespace": "nosuch", "relevant": ["d2"]},
    ]
    golden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return golden


@pytest.fixture
def searches(monkeypatch) -> list[str]:
    """The namespaces searched in this process."""
    from kbctl.api.kb import KnowledgeBase

    seen: list[str] = []
    real = KnowledgeBase.search

    def search(self, query, namespace, *args, **kwargs):
        seen.append(namespace)
        return real(self, query, namespace, *args, **kwargs)

    monkeypatch.setattr(KnowledgeBase, "search", search)
    return seen


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_golden_query_naming_a_namespace_that_does_not_exist_is_refused_before_any_search(
    cli, golden_of_two_namespaces, searches, command
):
    p = cli("eval", command, str(golden_of_two_namespaces), *(("--modes", "lexical") if command == "run" else ()))
    _one_error(p, "'nosuch'", "does not exist")
    assert searches == []
    # limited to the queries of namespaces that exist, it runs
    p = cli("eval", command, str(golden_of_two_namespaces), "--limit", "2",
            *(("--modes", "lexical") if command == "run" else ("--rrf-k", "60", "--candidates", "50", "--fusion", "rrf")))  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    assert searches and set(searches) == {"tiny"}


def test_a_golden_query_without_a_namespace_is_refused_before_any_search(cli, golden_of_two_namespaces, searches):
    rows = [json.loads(line) for line in golden_of_two_namespaces.read_text().splitlines()]
    del rows[2]["namespace"]
    golden_of_two_namespaces.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = cli("eval", "run", str(golden_of_two_namespaces), "--modes", "lexical")
    _one_error(p, "q3", "namespace")
    assert searches == []


def test_a_rerank_mode_without_a_reranker_is_refused_before_any_search(cli, golden_of_two_namespaces, searches):
    """``--modes hybrid,rerank`` with no cross-encoder configured ran 'rerank' as plain hybrid (each
    search noted 'reranker unavailable', the eval said nothing): a row named rerank that measured
    no reranking, and a CI gate on it that held or failed for hybrid's reasons."""
    p = cli("eval", "run", str(golden_of_two_namespaces), "--limit", "2", "--modes", "hybrid,rerank")
    line = _one_error(p, "'rerank'", "reranker")
    assert "hash-384" in line, line  # the profile searched, which has none
    assert "[profile.rerank]" in p.stderr.decode() or "rerank]" in p.stderr.decode()
    assert searches == []
