"""The sample corpus eval fixture through the CLI, with a --fail-under gate (CI's quality gate).

The whole sample corpus is ingested once with the real model into its own tenant; then
`kbctl eval run` must clear the gates, and a gate set above what search achieves must fail with
exit code 3 (checked in a real process), so a regression in search fails the build.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLE

NAMESPACES = {
    "billing_kb": "support/billing",
    "technical_kb": "support/technical",
    "account_kb": "support/account",
    "handbook_kb": "engineering/handbook",
    "releases_kb": "engineering/releases",
}
TENANT = "sample_eval"
# Identifier queries whose defining section (headed by the identifier) must be the first passage.
IDENTIFIER_QUERIES = ("q19", "q20", "q83", "q84", "q85", "q86", "q87")


@pytest.fixture(scope="module")
def sample_ingested(kb_home):
    import kbctl

    kb = kbctl.open(home=kb_home, tenant=TENANT, profile="minilm")
    for ns, folder in NAMESPACES.items():
        report = kb.ingest([str(SAMPLE / folder)], ns, verify=False)
        assert not report.errors, report.errors
    kb.close()
    return TENANT


def test_sample_eval_passes_its_gates(cli, sample_ingested, tmp_path):
    out = tmp_path / "eval.json"
    junit = tmp_path / "junit.xml"
    p = cli(
        "eval",
        "run",
        str(SAMPLE / "eval" / "queries.jsonl"),
        "--modes",
        "lexical,dense,hybrid",
        "--fail-under",
        "hybrid:ndcg@10=0.90",
        "--fail-under",
        "lexical:ndcg@10=0.85",
        "--fail-under",
        "dense:ndcg@10=0.80",
        "--fail-under",
        "recall@10=0.90",
        "--fail-under",
        "hybrid:passage_mrr@10=0.90",
        "--fail-under",
        "lexical:passage_mrr@10=0.85",
        "--fail-under",
        "hybrid:passage_ndcg@10=0.90",
        "--json",
        str(out),
        "--junit",
        str(junit),
        tenant_override=sample_ingested,
    )
    assert p.returncode == 0, p.stderr.decode()
    data = json.loads(out.read_text())
    # each mode after the first is set against it, query by query, with the paired test's p-value
    versus = p.stdout.decode().split("against lexical (paired randomisation test)")[1]
    for mode in ("dense", "hybrid"):
        row = next(line for line in versus.splitlines() if f" {mode} " in line)
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        per = [
            (q["ndcg@10"], data["modes"][mode]["per_query"][q_id]["ndcg@10"])
            for q_id, q in data["modes"]["lexical"]["per_query"].items()
        ]
        assert cells[1] == "ndcg@10" and cells[2] == f"{sum(b - a for a, b in per) / len(per):.4f}", cells
        assert int(cells[4]) == sum(b > a + 1e-9 for a, b in per) and int(cells[6]) == len(per)
    for mode in ("lexical", "dense", "hybrid"):
        m = data["modes"][mode]
        assert m["num_queries"] >= 50
        for key in ("ndcg@10", "recall@10", "recall@100", "mrr@10", "latency_ms_p50", "latency_ms_p95"):
            assert key in m["metrics"]
    hybrid = data["modes"]["hybrid"]["metrics"]["ndcg@10"]
    assert hybrid >= max(data["modes"]["dense"]["metrics"]["ndcg@10"], 0.9)
    for mode in ("lexical", "hybrid"):
        passages = data["modes"][mode]["passage_per_query"]
        assert {q: passages[q]["mrr@10"] for q in IDENTIFIER_QUERIES} == dict.fromkeys(IDENTIFIER_QUERIES, 1.0), mode
    assert "<testsuite" in junit.read_text()


def test_a_gate_above_reach_fails_with_exit_3(cli_process, sample_ingested, tmp_path):
    p = cli_process(
        "eval",
        "run",
        str(SAMPLE / "eval" / "queries.jsonl"),
        "--modes",
        "lexical",
        "--limit",
        "10",
        "--fail-under",
        "lexical:ndcg@10=1.01",
        tenant_override=sample_ingested,
    )
    assert p.returncode == 3
    assert "gate failed" in p.stderr.decode() and "Traceback" not in p.stderr.decode()


def test_a_drop_below_the_baseline_fails_with_exit_3(cli, sample_ingested, tmp_path):
    base = tmp_path / "base.json"
    p = cli(
        "eval",
        "run",
        str(SAMPLE / "eval" / "queries.jsonl"),
        "--modes",
        "lexical",
        "--limit",
        "20",
        "--json",
        str(base),
        tenant_override=sample_ingested,
    )
    assert p.returncode == 0, p.stderr.decode()
    data = json.loads(base.read_text())
    data["modes"]["lexical"]["metrics"]["ndcg@10"] = 1.5  # pretend the past was better
    base.write_text(json.dumps(data))
    p = cli(
        "eval",
        "run",
        str(SAMPLE / "eval" / "queries.jsonl"),
        "--modes",
        "lexical",
        "--limit",
        "20",
        "--baseline",
        str(base),
        "--tolerance",
        "0.01",
        tenant_override=sample_ingested,
    )
    assert p.returncode == 3


def test_alpha_passes_a_drop_that_is_one_query_and_fails_one_on_every_query(cli, sample_ingested, tmp_path):
    """`--alpha`: a drop past the tolerance fails only if the paired test finds it significant."""
    run = ("eval", "run", str(SAMPLE / "eval" / "queries.jsonl"), "--modes", "lexical", "--limit", "20")
    base = tmp_path / "base.json"
    p = cli(*run, "--json", str(base), tenant_override=sample_ingested)
    assert p.returncode == 0, p.stderr.decode()
    data = json.loads(base.read_text())
    mode = data["modes"]["lexical"]

    def pretend_better(queries):
        past = json.loads(json.dumps(data))
        per = past["modes"]["lexical"]["per_query"]
        for q in queries:
            per[q]["ndcg@10"] += 0.5
        past["modes"]["lexical"]["metrics"]["ndcg@10"] = sum(s["ndcg@10"] for s in per.values()) / len(per)
        path = tmp_path / f"past{len(queries)}.json"
        path.write_text(json.dumps(past))
        return path

    one = pretend_better(list(mode["per_query"])[:1])  # 0.5 on one of 20 queries: a 0.025 mean drop
    p = cli(*run, "--baseline", str(one), "--tolerance", "0.01", tenant_override=sample_ingested)
    assert p.returncode == 3, "without --alpha the tolerance alone decides"
    p = cli(*run, "--baseline", str(one), "--tolerance", "0.01", "--alpha", "0.05", tenant_override=sample_ingested)
    assert p.returncode == 0, p.stderr.decode()
    compared = p.stdout.decode().split("against baseline")[1]
    row = next(line for line in compared.splitlines() if "ndcg@10" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    # mode, metric, baseline, current, delta, p, queries: one query differs, so p = 1 (either sign is as far)
    assert cells[1] == "ndcg@10" and cells[4] == "-0.0250" and cells[5:] == ["1", "20"], cells

    every = pretend_better(list(mode["per_query"]))
    p = cli(*run, "--baseline", str(every), "--alpha", "0.05", tenant_override=sample_ingested)
    assert p.returncode == 3
    assert "lexical: ndcg@10" in p.stderr.decode() and "p < 0.001" in p.stderr.decode()
    p = cli(*run, "--baseline", str(every), "--alpha", "2", tenant_override=sample_ingested)
    assert p.returncode != 0 and "significance level" in p.stderr.decode() and "Traceback" not in p.stderr.decode()


def test_eval_run_writes_an_html_report_with_charts(cli, sample_ingested, tmp_path):
    html = tmp_path / "r.html"
    p = cli(
        "eval",
        "run",
        str(SAMPLE / "eval" / "queries.jsonl"),
        "--modes",
        "lexical,hybrid",
        "--limit",
        "15",
        "--report",
        str(html),
        tenant_override=sample_ingested,
    )
    assert p.returncode == 0, p.stderr.decode()
    text = html.read_text()
    assert "<svg" in text and "ndcg@10" in text.lower()
