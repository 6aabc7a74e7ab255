"""Evaluation: datasets, trec_eval-exact metrics, the runner, gates and the HTML report.

The runner takes a search callable, so this package never touches the database::

    from kbctl.evals import load_dataset, run_eval, report_to_json, render_html

    dataset = load_dataset(Path("sample_corpus/eval/queries.jsonl"))
    report = run_eval(dataset, search=my_search, modes=["lexical", "dense", "hybrid"])
"""

from __future__ import annotations

from .datasets import (
    EvalDataset,
    EvalQuery,
    beir_relevant_documents,
    check_beir_corpus,
    iter_beir_corpus,
    load_beir,
    load_dataset,
    load_golden,
    qrels_file,
)
from .gates import (
    CompareRow,
    Gate,
    GateResult,
    check_alpha,
    check_comparable,
    check_gates,
    check_gates_can_be_read,
    compare,
    computed_metrics,
    enforce_gates,
    gate_results,
    parse_gate,
    unmatched_metrics,
    write_junit,
)
from .metrics import aggregate, evaluate, paired_randomization
from .report import render_html
from .runner import EvalReport, ModeResult, report_from_json, report_to_json, run_eval

__all__ = [
    "EvalQuery",
    "EvalDataset",
    "load_beir",
    "load_golden",
    "load_dataset",
    "iter_beir_corpus",
    "beir_relevant_documents",
    "check_beir_corpus",
    "qrels_file",
    "evaluate",
    "aggregate",
    "ModeResult",
    "EvalReport",
    "run_eval",
    "report_to_json",
    "report_from_json",
    "Gate",
    "GateResult",
    "CompareRow",
    "parse_gate",
    "gate_results",
    "check_gates",
    "check_gates_can_be_read",
    "computed_metrics",
    "enforce_gates",
    "compare",
    "check_alpha",
    "check_comparable",
    "unmatched_metrics",
    "write_junit",
    "render_html",
    "paired_randomization",
]
