"""The eval runner with a fake search callable; gates, baseline comparison, JSON and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import MappingProxyType

import pytest

from kbctl.errors import CheckFailed, ConfigError, UsageError
from kbctl.evals.datasets import EvalDataset, EvalQuery
from kbctl.evals.gates import Gate, check_gates, compare, enforce_gates, parse_gate, write_junit
from kbctl.evals.metrics import percentile
from kbctl.evals.runner import (
    CURVE_KS,
    rank_to_run,
    report_from_json,
    report_to_json,
    run_eval,
)

DATASET = EvalDataset(
    "tiny",
    (EvalQuery("q1", "refunds", "kb"), EvalQuery("q2", "plans", "kb"), EvalQuery("q3", "nothing")),
    MappingProxyType({"q1": {"a": 2, "b": 1}, "q2": {"c": 1}, "q3": {"z": 1}}),
    None,
    "golden",
)

RESULTS = {
    # "good" finds everything at the top; the duplicate "a" must not count twice
    "good": {"q1": [("a", 0.9), ("a", 0.8), ("b", 0.7)], "q2": [("c", 0.5), ("x", 0.4)], "q3": []},
    # "bad" finds c at rank 2 only; equal scores must keep the returned order
    "bad": {"q1": [("x", 1.0), ("y", 1.0)], "q2": [("y", 1.0), ("c", 1.0)], "q3": [("y", 0.1)]},
}


def fake_search(query: EvalQuery, mode: str):
    return RESULTS[mode][query.id]


@pytest.fixture(scope="module")
def report():
    return run_eval(DATASET, fake_search, ["good", "bad"], settings={"profile": "minilm"})


def test_metrics_per_mode(report):
    good, bad = report.mode("good"), report.mode("bad")
    assert good.num_queries == bad.num_queries == 3
    assert good.per_query["q1"]["ndcg@10"] == pytest.approx(1.0)
    assert good.per_query["q1"]["p@10"] == pytest.approx(0.2)  # "a" counted once
    assert good.per_query["q3"] == dict.fromkeys(good.per_query["q3"], 0.0)  # no results
    assert good.metrics["recall@10"] == pytest.approx(2 / 3)
    # returned order wins over trec_eval's docid tie-break: c stays at rank 2 although "y" > "c"
    assert bad.per_query["q2"]["mrr@10"] == pytest.approx(0.5)
    assert bad.metrics["mrr@10"] == pytest.approx(0.5 / 3)
    assert set(good.metrics) >= {
        "ndcg@10",
        "recall@10",
        "recall@100",
        "p@10",
        "mrr@10",
        "map",
        "latency_ms_p50",
        "latency_ms_p95",
    }
    assert list(good.recall_curve) == list(CURVE_KS) and good.recall_curve[1] == pytest.approx((0.5 + 1 + 0) / 3)
    assert len(good.latencies_ms) == 3 and all(t >= 0 for t in good.latencies_ms)
    assert report.settings["profile"] == "minilm" and report.settings["num_queries"] == 3


def test_depth_limit_k_and_progress():
    seen = []
    rep = run_eval(
        DATASET,
        fake_search,
        ["good"],
        k=5,
        depth=1,
        limit=2,
        progress=lambda mode, done, total: seen.append((mode, done, total)),
    )
    assert seen == [("good", 1, 2), ("good", 2, 2)]
    m = rep.mode("good")
    assert m.num_queries == 2 and "p@5" in m.metrics and "ndcg@5" in m.metrics
    assert m.per_query["q1"]["recall@10"] == pytest.approx(0.5)  # only the top 1 kept
    assert list(m.recall_curve) == [1, 5]


def test_rank_to_run_dedupes_and_keeps_order():
    run = rank_to_run([("b", 0.1), ("a", 0.9), ("b", 0.5), ("c", 0.9)], depth=10)
    assert list(run) == ["b", "a", "c"] and run["b"] > run["a"] > run["c"]


def test_percentile_matches_numpy():
    np = pytest.importorskip("numpy")
    values = [5.0, 1.0, 9.5, 3.25, 7.0, 2.0]
    for q in (0, 50, 95, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([], 50) == 0.0


def test_bad_arguments():
    with pytest.raises(UsageError):
        run_eval(DATASET, fake_search, [])
    with pytest.raises(UsageError):
        run_eval(DATASET, fake_search, ["good"], k=0)


@pytest.mark.parametrize(
    "text, gate",
    [
        ("ndcg@10=0.65", Gate("ndcg@10", 0.65, None, ">=")),
        ("hybrid:ndcg@10=0.65", Gate("ndcg@10", 0.65, "hybrid", ">=")),
        (" hybrid : recall@100 >= 0.9 ", Gate("recall@100", 0.9, "hybrid", ">=")),
        ("latency_ms_p95=250", Gate("latency_ms_p95", 250.0, None, "<=")),
        ("MAP<=0.5", Gate("map", 0.5, None, "<=")),
    ],
)
def test_parse_gate(text, gate):
    assert parse_gate(text) == gate


@pytest.mark.parametrize("text", ["ndcg@10", "ndcg@10=high", "foo@10=0.5", "a:b:ndcg@10=1", "=0.5"])
def test_bad_gates(text):
    with pytest.raises(UsageError):
        parse_gate(text)


def test_check_gates(report):
    assert check_gates(report, [parse_gate("good:ndcg@10=0.6")]) == []
    failures = check_gates(report, [parse_gate("ndcg@10=0.6"), parse_gate("latency_ms_p95=100000")])
    assert len(failures) == 1 and failures[0].startswith("bad: ndcg@10 = ")
    with pytest.raises(CheckFailed) as info:
        enforce_gates(report, [parse_gate("recall@10=0.99")])
    assert info.value.exit_code == 3 and "2 eval gate(s) failed" in str(info.value)
    enforce_gates(report, [parse_gate("good:recall@100=0.5")])
    with pytest.raises(UsageError):
        check_gates(report, [parse_gate("nope:ndcg@10=0.5")])
    with pytest.raises(UsageError):
        check_gates(report, [parse_gate("ndcg@3=0.5")])  # not computed


def test_json_round_trip_and_schema(report):
    data = json.loads(json.dumps(report_to_json(report)))
    assert data["schema"] == "kbctl.eval/1" and data["dataset"] == "tiny" and data["k"] == 10
    assert data["settings"]["modes"] == ["good", "bad"]
    good = data["modes"]["good"]
    assert good["num_queries"] == 3
    for key in ("ndcg@10", "recall@10", "recall@100", "mrr@10", "map", "p@10", "latency_ms_p50", "latency_ms_p95"):
        assert isinstance(good["metrics"][key], float)
    assert set(good["per_query"]) == {"q1", "q2", "q3"} and "latency_ms" in good["per_query"]["q1"]
    assert good["recall_curve"]["100"] == pytest.approx(2 / 3)
    back = report_from_json(data)
    assert back.mode_names == ("good", "bad")
    assert back.mode("good").per_query == report.mode("good").per_query
    assert back.mode("good").recall_curve == report.mode("good").recall_curve
    with pytest.raises(ConfigError):
        report_from_json({"nothing": 1})


def test_compare_with_baseline(report):
    baseline = report_to_json(report)
    baseline["modes"]["good"]["metrics"]["ndcg@10"] = 0.70  # 0.667 now: worse by > tolerance
    baseline["modes"]["good"]["metrics"]["latency_ms_p95"] = 0.0  # latencies never regress
    baseline["modes"]["bad"]["metrics"]["map"] -= 0.005
    rows, regressions = compare(report, baseline, tolerance=0.01)
    # the per-query scores did not change, so the paired test sees no difference at all (p = 1)
    assert len(regressions) == 1 and regressions[0] == "good: ndcg@10 0.7000 -> 0.6667 (-0.0333, p = 1)"
    row = next(r for r in rows if r.mode == "bad" and r.metric == "map")
    assert row.delta == pytest.approx(0.005) and not row.regressed
    assert compare(report, report_to_json(report), 0.0)[1] == []
    with pytest.raises(ConfigError):
        compare(report, {"modes": []}, 0.01)


def test_junit(report, tmp_path: Path):
    path = tmp_path / "junit.xml"
    write_junit(report, [parse_gate("ndcg@10=0.6"), parse_gate("good:map=0.1")], path)
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("kbctl.eval.tiny.good", "ndcg@10>=0.6"),
        ("kbctl.eval.tiny.bad", "ndcg@10>=0.6"),
        ("kbctl.eval.tiny.good", "map>=0.1"),
    ]
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and failed[0].get("classname").endswith(".bad")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and root.get("failures") == "1"


def test_passage_metrics_from_judged_sections(tmp_path):
    from kbctl.evals.datasets import load_golden
    from kbctl.evals.runner import report_from_json, report_to_json, run_eval

    path = tmp_path / "queries.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "q1",
                "query": "LMN-4012",
                "relevant": {"a.md": 2},
                "passages": {"a.md#LMN-4012 — E_SCOPE_DENIED": 2},
            }
        )
        + "\n"
        + json.dumps({"id": "q2", "query": "other", "relevant": {"b.md": 1}})
        + "\n"
    )
    ds = load_golden(path)
    assert dict(ds.passage_qrels["q1"]) == {"a.md#LMN-4012 — E_SCOPE_DENIED": 2} and "q2" not in ds.passage_qrels

    class Hits(list):
        passages: list

    def search(q, mode):
        out = Hits([("a.md", 1.0), ("b.md", 0.5)])
        first = "a.md#Deprecated codes" if mode == "worse" else "a.md#LMN-4012 — E_SCOPE_DENIED"
        out.passages = [first, "a.md#LMN-4012 — E_SCOPE_DENIED" if mode == "worse" else "a.md#Deprecated codes"]
        return out

    rep = run_eval(ds, search, ["best", "worse"])
    assert rep.mode("best").metrics["passage_mrr@10"] == 1.0
    assert rep.mode("worse").metrics["passage_mrr@10"] == 0.5
    assert parse_gate("passage_mrr@10=1").metric == "passage_mrr@10"
    assert check_gates(rep, [parse_gate("passage_mrr@10=1")]) == ["worse: passage_mrr@10 = 0.5000 missed >= 1"]
    again = report_from_json(report_to_json(rep))
    assert again.mode("worse").passage_per_query == rep.mode("worse").passage_per_query


def test_a_passage_must_name_document_and_heading(tmp_path):
    from kbctl.evals.datasets import load_golden

    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"id": "q1", "query": "x", "relevant": {"a.md": 1}, "passages": {"a.md": 2}}) + "\n")
    with pytest.raises(ConfigError, match="DOC#HEADING"):
        load_golden(path)
