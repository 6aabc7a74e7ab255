"""The paired randomisation test behind `kbctl eval --baseline`'s p column and `--alpha`."""

from __future__ import annotations

import itertools
import json
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.errors import UsageError
from kbctl.evals.datasets import EvalDataset, EvalQuery
from kbctl.evals.gates import compare
from kbctl.evals.metrics import EXACT_QUERIES, SIGN_CELLS, paired_randomization, sign_block
from kbctl.evals.report import render_html
from kbctl.evals.runner import report_to_json, run_eval


def _brute(a, b) -> float:
    """Every sign pattern of the differences, in plain Python: the definition the test implements."""
    d = [y - x for x, y in zip(a, b) if abs(y - x) > 1e-12]
    if not d:
        return 1.0
    observed = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-9
        for signs in itertools.product((-1, 1), repeat=len(d))
    )
    return hits / 2 ** len(d)


def test_small_cases_by_hand():
    assert paired_randomization([0, 0, 0], [1, 1, 1]) == pytest.approx(2 / 8)  # all + or all -
    # sums of four ±1: 4 (1 way), 2 (4), 0 (6), -2 (4), -4 (1); |sum| >= 2 in 10 of 16
    assert paired_randomization([0, 0, 0, 1], [1, 1, 1, 0]) == pytest.approx(10 / 16)
    assert paired_randomization([0.3, 0.5], [0.3, 0.5]) == 1.0  # no difference, nothing to test
    assert paired_randomization([], []) == 1.0
    with pytest.raises(UsageError):
        paired_randomization([0.1, 0.2], [0.1])


values = st.floats(min_value=0.0, max_value=1.0, allow_nan=False).map(lambda x: round(x, 3))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(values, values), min_size=0, max_size=10))
def test_exact_branch_is_the_definition_symmetric_and_order_free(pairs):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    p = paired_randomization(a, b)
    assert p == pytest.approx(_brute(a, b))
    assert 0.0 < p <= 1.0
    assert paired_randomization(b, a) == pytest.approx(p)  # two-sided
    assert paired_randomization(a[::-1], b[::-1]) == pytest.approx(p)  # the queries' order is no evidence


def test_sampled_branch_agrees_with_the_exact_count():
    n = EXACT_QUERIES + 2  # sampled from here on; 2^18 patterns are still countable for the check
    a = [0.0] * n
    b = [0.05 * ((i % 5) + 1) * (1 if i % 3 else -1) for i in range(n)]
    exact = _brute(a, b)
    assert 0.05 < exact < 0.95, "the case must sit between the tails to test the sampling"
    sampled = paired_randomization(a, b, rounds=20_000, seed=1)
    assert sampled == pytest.approx(exact, abs=0.02)
    assert paired_randomization(a, b, rounds=20_000, seed=1) == sampled  # seeded: a report is reproducible


def test_a_consistent_gain_is_significant_and_a_balanced_one_is_not():
    n = 40
    assert paired_randomization([0.5] * n, [0.6] * n) < 0.001  # every query better
    up_down = [0.6 if i % 2 else 0.4 for i in range(n)]
    assert paired_randomization([0.5] * n, up_down) > 0.99  # as many better as worse, by as much


# --- the comparison with a baseline -------------------------------------------------------------

N = 12
DATASET = EvalDataset(
    "twelve",
    tuple(EvalQuery(f"q{i}", f"query {i}", "kb") for i in range(N)),
    MappingProxyType({f"q{i}": {f"d{i}": 1} for i in range(N)}),
    None,
    "golden",
)


def _search(query: EvalQuery, mode: str):
    i = int(query.id[1:])
    # "now" finds each query's document second (nDCG@10 0.63) where "then" found it first (1.0)
    return [(f"d{i}", 1.0)] if mode == "then" else [("x", 1.0), (f"d{i}", 0.5)]


def _baseline(worse_on: int) -> dict:
    """A baseline under the mode name "now" that was better on the first ``worse_on`` queries."""
    then = run_eval(DATASET, _search, ["then"])
    now = run_eval(DATASET, _search, ["now"])
    data = json.loads(json.dumps(report_to_json(now)))
    mode = data["modes"]["now"]
    for i in range(worse_on):
        mode["per_query"][f"q{i}"]["ndcg@10"] = then.mode("then").per_query[f"q{i}"]["ndcg@10"]
    mode["metrics"]["ndcg@10"] = sum(s["ndcg@10"] for s in mode["per_query"].values()) / N
    return data


def _ndcg_row(rows):
    return next(r for r in rows if r.metric == "ndcg@10")


def test_a_drop_on_two_queries_is_not_significant_and_alpha_lets_it_pass():
    report = run_eval(DATASET, _search, ["now"])
    base = _baseline(2)  # 0.37 lower on 2 of 12 queries: a mean drop of 0.06, past any tolerance
    rows, regressions = compare(report, base, tolerance=0.01)
    row = _ndcg_row(rows)
    assert row.delta == pytest.approx(-2 * (1 - 1 / 1.584962500721156) / N)
    assert row.queries == N and row.p_value == pytest.approx(2 / 4)  # two differing queries, exact
    assert row.regressed and "p = 0.5" in regressions[0]
    rows, regressions = compare(report, base, tolerance=0.01, alpha=0.05)
    assert not _ndcg_row(rows).regressed and not any("ndcg@10" in r for r in regressions)


def test_a_drop_on_every_query_is_significant_and_still_fails_with_alpha():
    report = run_eval(DATASET, _search, ["now"])
    rows, regressions = compare(report, _baseline(N), tolerance=0.01, alpha=0.05)
    row = _ndcg_row(rows)
    assert row.p_value == pytest.approx(2 / 2**N) and row.regressed
    assert any(r.startswith("now: ndcg@10") for r in regressions)


def test_a_baseline_without_per_query_scores_fails_closed_under_alpha():
    report = run_eval(DATASET, _search, ["now"])
    base = _baseline(2)
    del base["modes"]["now"]["per_query"]
    rows, _ = compare(report, base, tolerance=0.01, alpha=0.05)
    row = _ndcg_row(rows)
    assert row.p_value is None and row.queries == 0 and row.regressed  # untestable: the drop counts
    with pytest.raises(UsageError):
        compare(report, base, tolerance=0.01, alpha=1.5)


def test_the_html_report_states_the_p_value():
    report = run_eval(DATASET, _search, ["then", "now"])
    html = render_html(report)
    # every one of the 12 queries is worse: p = 2 / 2^12 rounds to "< 0.001"
    assert "< 0.001</b>p (paired randomisation)" in html


def test_versus_sets_one_mode_against_another_query_by_query():
    report = run_eval(DATASET, _search, ["then", "now"])
    v = report.versus("then", "now")
    assert (v.a, v.b, v.metric, v.queries, v.better, v.worse) == ("then", "now", "ndcg@10", N, 0, N)
    assert v.delta == pytest.approx(-(1 - 1 / 1.584962500721156))  # first place to second, every query
    assert v.p_value == pytest.approx(2 / 2**N) and v.p_text == "< 0.001"
    assert str(v) == f"{v.delta:+.4f} (p < 0.001; 0 better, {N} worse)"
    assert report.versus("now", "then").p_value == v.p_value  # two-sided
    same = report.versus("now", "now")
    assert same.delta == 0.0 and same.p_value == 1.0 and same.better == same.worse == 0
    with pytest.raises(UsageError):
        report.versus("then", "nope")


def test_the_runs_json_carries_versus_and_the_comparison():
    """``EvalRun.to_json``: what the tables and the exit code say is in the JSON too."""
    from kbctl.api import compare_reports
    from kbctl.api.evals import EvalRun

    two = EvalRun(run_eval(DATASET, _search, ["then", "now"]))
    data = json.loads(json.dumps(two.to_json()))
    (v,) = data["versus"]
    assert (v["a"], v["b"], v["metric"], v["better"], v["worse"], v["queries"]) == ("then", "now", "ndcg@10", 0, N, N)
    assert v["p_value"] == pytest.approx(2 / 2**N) and "comparison" not in data
    assert "versus" not in EvalRun(run_eval(DATASET, _search, ["now"])).to_json()  # one mode: nothing to set against

    now = report_to_json(run_eval(DATASET, _search, ["now"]))
    judged = compare_reports(_baseline(N), now, alpha=0.05).to_json()
    row = next(r for r in judged["comparison"] if r["metric"] == "ndcg@10")
    assert row["regressed"] is True and row["p_value"] == pytest.approx(2 / 2**N) and row["queries"] == N
    assert judged["regressions"] and judged["regressions"][0].startswith("now: ndcg@10")


def test_a_large_query_set_draws_its_sign_patterns_in_bounded_blocks():
    assert sign_block(800) == 4096  # every collection here: the blocks, and so the p-values, as before
    for n in (5_000, 100_000, 10_000_000):
        assert sign_block(n) >= 1 and sign_block(n) * n <= max(SIGN_CELLS, n)
    n = 50_000  # 4,096 patterns of 50,000 queries would be 1.6 GB at once
    assert paired_randomization([0.5] * n, [0.5 + (0.01 if i % 2 else -0.01) for i in range(n)], rounds=200) > 0.9
