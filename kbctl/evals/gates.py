"""Quality gates, baseline comparison and JUnit output for an ``EvalReport``.

A gate is written ``[mode:]metric=value`` (or with ``>=`` / ``<=``)::

    ndcg@10=0.65            every mode must reach 0.65
    passage_mrr@10=0.9      passage-level (sections judged in the golden set's "passages")
    hybrid:recall@100=0.9   only the hybrid mode
    latency_ms_p95<=250     latencies are upper bounds ("=" means "<=" for them)

``check_gates`` returns the failures as readable lines; ``enforce_gates`` raises ``CheckFailed``
(exit code 3) when any gate fails. ``compare`` measures a report against a saved JSON report.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from kbctl.errors import CheckFailed, ConfigError, UsageError

from .metrics import format_p, is_lower_better, p_clause, paired_randomization, parse_metric
from .runner import PASSAGE_METRICS, PASSAGE_PREFIX, EvalReport, metric_names

__all__ = [
    "Gate",
    "GateResult",
    "CompareRow",
    "parse_gate",
    "gate_results",
    "check_gates",
    "enforce_gates",
    "compare",
    "write_junit",
    "check_alpha",
    "computed_metrics",
    "check_gates_can_be_read",
    "check_comparable",
]

_GATE_RE = re.compile(r"^\s*(?:([A-Za-z_][\w-]*)\s*:)?\s*([\w@.]+)\s*(>=|<=|=)\s*([-+0-9.eE]+)\s*$")
LATENCY_METRICS = ("latency_ms_p50", "latency_ms_p95")


@dataclass(frozen=True)
class Gate:
    """``metric op threshold`` for one mode, or for every mode when ``mode`` is None."""

    metric: str
    threshold: float
    mode: str | None = None
    op: str = ">="

    def __str__(self) -> str:
        prefix = f"{self.mode}:" if self.mode else ""
        return f"{prefix}{self.metric}{self.op}{self.threshold:g}"

    def holds(self, value: float) -> bool:
        """True when ``value`` satisfies the gate."""
        return value >= self.threshold if self.op == ">=" else value <= self.threshold


@dataclass(frozen=True)
class GateResult:
    """One gate checked on one mode."""

    gate: Gate
    mode: str
    value: float
    passed: bool

    @property
    def message(self) -> str:
        verb = "reached" if self.passed else "missed"
        return f"{self.mode}: {self.gate.metric} = {self.value:.4f} {verb} {self.gate.op} {self.gate.threshold:g}"


@dataclass(frozen=True)
class CompareRow:
    """One metric of one mode against the baseline; ``delta`` = current − baseline."""

    mode: str
    metric: str
    baseline: float
    current: float
    delta: float
    regressed: bool
    p_value: float | None = None  # paired randomisation test over the queries both runs scored
    queries: int = 0  # how many queries the p-value compares (0: the baseline kept no per-query scores)

    @property
    def p_text(self) -> str | None:
        """The p-value as reports print it ("0.47", "< 0.001"); None when untested."""
        return None if self.p_value is None else format_p(self.p_value)


def parse_gate(text: str) -> Gate:
    """Parse ``[mode:]metric=value`` (also ``>=``/``<=``) into a ``Gate``; bad text is a ``UsageError``."""
    m = _GATE_RE.match(text)
    if not m:
        raise UsageError(f"cannot read gate {text!r}", hint="write it as ndcg@10=0.65 or hybrid:ndcg@10=0.65")
    mode, metric, op, value = m.group(1), m.group(2).lower(), m.group(3), m.group(4)
    if metric not in LATENCY_METRICS:
        parse_metric(metric.removeprefix(PASSAGE_PREFIX))  # raises UsageError for an unknown metric
    try:
        threshold = float(value)
    except ValueError:
        raise UsageError(f"gate {text!r}: {value!r} is not a number") from None
    if op == "=":
        op = "<=" if is_lower_better(metric) else ">="
    return Gate(metric, threshold, mode, op)


def computed_metrics(k: int = 10, passages: bool = False) -> list[str]:
    """The metrics a run with cut-off ``k`` computes for every mode (the passage ones when its
    dataset judges passages), latencies included."""
    names = metric_names(k)
    if passages:
        names += [PASSAGE_PREFIX + m for m in PASSAGE_METRICS]
    return [*names, *LATENCY_METRICS]


def check_gates_can_be_read(gates: Sequence[Gate], modes: Sequence[str], computed: Sequence[str]) -> None:
    """A ``UsageError`` for a gate no run of ``modes`` computing ``computed`` could check: a mode it
    does not search, a metric it does not compute. Checked before any query runs: such a gate
    would otherwise be found only after the whole run."""
    for gate in gates:
        if gate.mode is not None and gate.mode not in modes:
            raise UsageError(
                f"gate {gate} names mode {gate.mode!r}, which this run does not search",
                hint=f"add it to --modes (searched: {', '.join(modes)}), or leave the mode out to gate every mode",
            )
        if gate.metric not in computed:
            raise UsageError(
                f"gate {gate}: {gate.metric} is not computed by this run",
                hint=f"computed: {', '.join(computed)} (-k sets p@K)",
            )


def gate_results(report: EvalReport, gates: Sequence[Gate]) -> list[GateResult]:
    """Check each gate on each mode it names (all modes when it names none)."""
    out = []
    for gate in gates:
        modes = [report.mode(gate.mode)] if gate.mode else list(report.modes)
        for result in modes:
            if gate.metric not in result.metrics:
                raise UsageError(
                    f"gate {gate}: {gate.metric} was not computed", hint=f"computed: {', '.join(result.metrics)}"
                )
            value = result.metrics[gate.metric]
            out.append(GateResult(gate, result.mode, value, gate.holds(value)))
    return out


def check_gates(report: EvalReport, gates: Sequence[Gate]) -> list[str]:
    """The failed gates as readable lines (empty when every gate holds)."""
    return [r.message for r in gate_results(report, gates) if not r.passed]


def enforce_gates(report: EvalReport, gates: Sequence[Gate]) -> None:
    """Raise ``CheckFailed`` listing the failed gates, if any."""
    failures = check_gates(report, gates)
    if failures:
        raise CheckFailed(f"{len(failures)} eval gate(s) failed: " + "; ".join(failures))


def check_alpha(alpha: float | None) -> None:
    """A significance level for ``compare`` is in (0, 1]; anything else is a ``UsageError``."""
    if alpha is not None and not 0.0 < alpha <= 1.0:
        raise UsageError(f"alpha {alpha:g} is not a significance level", hint="pass a value in (0, 1], e.g. 0.05")


def check_comparable(
    baseline: Mapping[str, Any],
    dataset: str,
    depth: Any,
    queries: Collection[str],
    modes: Sequence[str],
    what: str = "baseline",
    this: str = "this run",
) -> list[str]:
    """A ``UsageError`` unless ``baseline`` (a saved report's JSON) can be set against a run of
    ``dataset`` to ``depth`` scoring ``queries`` in ``modes``: the same dataset, depth and queries
    (a mean over other queries, ``--limit`` or ``--split`` another, says nothing of a regression),
    and a mode in common. What a saved report does not record is not checked. Returns a note for
    each mode of the run the baseline does not hold (it is not compared)."""
    hint = f"compare runs of the same dataset, --split, --limit and --depth, or save a new {what} with --json"
    base_name = baseline.get("dataset")
    if isinstance(base_name, str) and base_name and base_name != dataset:
        raise UsageError(f"the {what} is of dataset {base_name!r}, {this} of {dataset!r}", hint=hint)
    recorded = baseline.get("settings")
    settings: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    base_depth = settings.get("depth")
    if base_depth is not None and depth is not None and base_depth != depth:
        raise UsageError(f"the {what} searched to depth {base_depth}, {this} to depth {depth}", hint=hint)
    base_queries = baseline.get("queries")
    if isinstance(base_queries, Mapping) and base_queries and set(base_queries) != set(queries):
        shared = len(set(base_queries) & set(queries))
        others = len(set(queries) - set(base_queries))
        was = ", ".join(f"{k} {settings[k]}" for k in ("split", "limit") if settings.get(k) is not None)
        raise UsageError(
            f"the {what} scored other queries: {this} scores {shared} of its {len(base_queries)}"
            + (f" and {others} it did not" if others else ""),
            hint=hint + (f" (the {what}'s: {was})" if was else ""),
        )
    base_modes = list(baseline.get("modes") or {})
    if not any(m in base_modes for m in modes):
        raise UsageError(
            f"the {what} and {this} share no mode ({this}: {', '.join(modes)})",
            hint=f"the {what}'s modes: {', '.join(base_modes) or 'none'}",
        )
    return [f"mode {m} is not in the {what}: not compared" for m in modes if m not in base_modes]


def unmatched_metrics(
    report: EvalReport, baseline_json: Mapping[str, Any], what: str = "baseline", this: str = "this run"
) -> list[str]:
    """A note naming the metrics of the modes both hold that only one side computed (``compare``
    leaves them out): a run with another ``-k`` computes ``p@K`` at its own K (and nDCG, recall and
    MRR at it too), so its p@5 and the baseline's p@10 are not compared. None when they match."""
    modes = baseline_json.get("modes") if isinstance(baseline_json, Mapping) else None
    if not isinstance(modes, Mapping):
        return []
    ours: dict[str, None] = {}
    theirs: dict[str, None] = {}
    for result in report.modes:
        base_mode = modes.get(result.mode)
        if not isinstance(base_mode, Mapping):
            continue
        base = base_mode.get("metrics") or {}
        ours.update(dict.fromkeys(m for m in result.metrics if m not in base))
        theirs.update(dict.fromkeys(m for m in base if m not in result.metrics))
    if not ours and not theirs:
        return []
    parts = [f"{', '.join(ours)} of {this} not in the {what}"] if ours else []
    parts += [f"{', '.join(theirs)} of the {what} not in {this}"] if theirs else []
    k = baseline_json.get("k")
    why = f" (the {what} was scored with -k {k}, {this} with -k {report.k})" if k not in (None, report.k) else ""
    return [f"metrics {'; '.join(parts)}: not compared{why}"]


def compare(
    report: EvalReport, baseline_json: Mapping[str, Any], tolerance: float = 0.01, alpha: float | None = None
) -> tuple[list[CompareRow], list[str]]:
    """Compare with a saved report; a regression is a quality metric below baseline − tolerance.

    Each quality metric also gets the p-value of a paired randomisation test over the queries both
    reports scored (``paired_randomization``), when the baseline kept its per-query scores. With
    ``alpha``, a drop past the tolerance counts as a regression only if it is also significant
    (p < alpha): on a few dozen queries a drop of 0.01 is often one query's luck. A baseline without
    per-query scores cannot be tested, and its drops count as before (fail closed).
    Only modes and metrics present in both are compared. Latencies get rows but never count as
    regressions: they depend on the machine.
    """
    modes = baseline_json.get("modes") if isinstance(baseline_json, Mapping) else None
    if not isinstance(modes, Mapping):
        raise ConfigError("baseline is not a kbctl eval report (no 'modes' object)")
    check_alpha(alpha)
    rows: list[CompareRow] = []
    for result in report.modes:
        base_mode = modes.get(result.mode) or {}
        base = base_mode.get("metrics") or {}
        base_per = base_mode.get("per_query") or {}
        for metric, current in result.metrics.items():
            if not isinstance(base.get(metric), (int, float)):
                continue
            delta = current - float(base[metric])
            p_value, shared = None, []
            if not is_lower_better(metric) and isinstance(base_per, Mapping):
                shared = [
                    q
                    for q, scores in result.per_query.items()
                    if metric in scores and isinstance((base_per.get(q) or {}).get(metric), (int, float))
                ]
                if shared:
                    p_value = paired_randomization(
                        [float(base_per[q][metric]) for q in shared], [result.per_query[q][metric] for q in shared]
                    )
            dropped = not is_lower_better(metric) and delta < -tolerance
            regressed = dropped and (alpha is None or p_value is None or p_value < alpha)
            rows.append(
                CompareRow(result.mode, metric, float(base[metric]), current, delta, regressed, p_value, len(shared))
            )
    regressions = [
        f"{r.mode}: {r.metric} {r.baseline:.4f} -> {r.current:.4f} ({r.delta:+.4f}"
        + (f", {p_clause(r.p_value)}" if r.p_value is not None else "")
        + ")"
        for r in rows
        if r.regressed
    ]
    return rows, regressions


def write_junit(report: EvalReport, gates: Sequence[Gate], path: Path) -> None:
    """Write JUnit XML: one testcase per mode × gate, a ``<failure>`` for each failed gate."""
    results = gate_results(report, gates)
    failures = sum(1 for r in results if not r.passed)
    suite = ET.Element(
        "testsuite",
        name=f"kbctl eval {report.dataset}",
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    props = ET.SubElement(suite, "properties")
    for key, value in report.settings.items():
        ET.SubElement(props, "property", name=str(key), value=str(value))
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"kbctl.eval.{report.dataset}.{r.mode}",
            name=f"{r.gate.metric}{r.gate.op}{r.gate.threshold:g}",
            time="0",
        )
        if not r.passed:
            ET.SubElement(case, "failure", message=r.message, type="CheckFailed").text = r.message
        ET.SubElement(case, "system-out").text = r.message
    root = ET.Element("testsuites", name="kbctl eval", tests=str(len(results)), failures=str(failures))
    root.append(suite)
    ET.indent(root)
    Path(path).write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))
