"""The evaluation report as one self-contained HTML page.

No script, no external stylesheet, font or image: the charts are inline SVG drawn by
``kbctl.evals.svg``, so the file can be attached to a CI run or mailed and opens offline.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

from kbctl.errors import UsageError

from .metrics import format_p, paired_randomization
from .runner import EvalReport, ModeResult
from .svg import Series, diff_bars, grouped_bars, line_chart, mode_colors

__all__ = ["render_html", "TABLE_COLUMNS"]

# (metric key, column title, higher is better)
TABLE_COLUMNS = (
    ("ndcg@10", "nDCG@10", True),
    ("recall@10", "Recall@10", True),
    ("recall@100", "Recall@100", True),
    ("p@{k}", "P@{k}", True),
    ("mrr@10", "MRR@10", True),
    ("map", "MAP", True),
    ("latency_ms_p50", "p50 ms", False),
    ("latency_ms_p95", "p95 ms", False),
)
BAR_METRICS = (("ndcg@10", "nDCG@10"), ("recall@10", "Recall@10"), ("mrr@10", "MRR@10"))
TOP_N = 8

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f6f8; color: #1f2933;
  font: 14px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 28px 32px 40px; }
header h1 { font-size: 24px; margin: 0 0 4px; letter-spacing: -0.01em; }
header h1 span { color: #66707a; font-weight: 400; }
.meta { color: #66707a; margin: 0 0 20px; }
.meta b { color: #1f2933; font-weight: 600; }
.card { background: #fff; border: 1px solid #e1e5ea; border-radius: 10px; padding: 18px 22px;
  margin-bottom: 18px; box-shadow: 0 1px 2px rgba(16, 24, 40, .04); }
.card h2 { font-size: 15px; margin: 0 0 12px; }
.card h2 small { color: #66707a; font-weight: 400; margin-left: 6px; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.row .card { margin-bottom: 18px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 7px 10px; text-align: right; border-bottom: 1px solid #edf0f3; white-space: nowrap; }
th { font-size: 12px; color: #66707a; font-weight: 600; text-transform: none; }
th:first-child, td:first-child { text-align: left; }
tbody tr:last-child td { border-bottom: 0; }
td.best { font-weight: 700; background: #eef7f1; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 8px; }
.stats { display: flex; gap: 26px; margin: 0 0 10px; color: #66707a; }
.stats b { font-size: 18px; margin-right: 4px; }
.win { color: #2f8a4f; } .loss { color: #b94242; }
.tops { display: grid; grid-template-columns: 1fr 1fr; gap: 22px; margin-top: 12px; }
.tops h3 { font-size: 13px; margin: 0 0 4px; }
.tops td.q { max-width: 300px; overflow: hidden; text-overflow: ellipsis; }
.qid { color: #66707a; font-size: 12px; margin-right: 4px; }
footer { color: #8a939c; font-size: 12px; text-align: center; margin-top: 8px; }
"""


def _columns(k: int) -> list[tuple[str, str, bool]]:
    return [(key.format(k=k), title.format(k=k), up) for key, title, up in TABLE_COLUMNS]


def _fmt(metric: str, value: float) -> str:
    return f"{value:.1f}" if metric.startswith("latency") else f"{value:.3f}"


def _metric_table(report: EvalReport, colors: dict[str, str]) -> str:
    """One row per mode; the best value of each column is highlighted."""
    cols = _columns(report.k)
    best = {}
    for key, _, up in cols:
        values = [m.metrics[key] for m in report.modes if key in m.metrics]
        if len(values) > 1:
            best[key] = max(values) if up else min(values)
    head = "".join(f"<th>{escape(title)}</th>" for _, title, _ in cols)
    rows = []
    for m in report.modes:
        cells = []
        for key, _, _ in cols:
            v = m.metrics.get(key)
            cls = ' class="best"' if v is not None and best.get(key) == v else ""
            cells.append(f"<td{cls}>{_fmt(key, v) if v is not None else '–'}</td>")
        swatch = f'<span class="swatch" style="background:{colors[m.mode]}"></span>'
        rows.append(f"<tr><td>{swatch}{escape(m.mode)}</td>{''.join(cells)}<td>{m.num_queries}</td></tr>")
    return f"<table><thead><tr><th>mode</th>{head}<th>queries</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _quality_chart(report: EvalReport, colors: dict[str, str]) -> str:
    series = [
        Series(m.mode, colors[m.mode], tuple(m.metrics.get(key, 0.0) for key, _ in BAR_METRICS)) for m in report.modes
    ]
    return grouped_bars([title for _, title in BAR_METRICS], series, label="nDCG@10, Recall@10, MRR@10 per mode")


def _recall_chart(report: EvalReport, colors: dict[str, str]) -> str:
    ks = sorted(set.intersection(*(set(m.recall_curve) for m in report.modes)) if report.modes else set())
    if not ks:
        return "<p>No recall curve in this report.</p>"
    series = [Series(m.mode, colors[m.mode], tuple(m.recall_curve[c] for c in ks)) for m in report.modes]
    return line_chart(ks, series, label="recall at k per mode")


def _pick_pair(report: EvalReport, compare_modes: tuple[str, str] | None) -> tuple[ModeResult, ModeResult] | None:
    """The two modes to compare: as asked, else the first and the last mode of the report."""
    if compare_modes is not None:
        return report.mode(compare_modes[0]), report.mode(compare_modes[1])
    if len(report.modes) < 2:
        return None
    return report.modes[0], report.modes[-1]


def _top_table(
    title: str, rows: Sequence[tuple[str, float, float, float]], a: str, b: str, cls: str, texts: dict[str, str]
) -> str:
    body = "".join(
        f'<tr><td class="q" title="{escape(texts.get(q, q))}">{_query_label(q, texts)}</td>'
        f'<td>{va:.3f}</td><td>{vb:.3f}</td><td class="{cls}">{d:+z.3f}</td></tr>'
        for q, va, vb, d in rows
    )
    if not body:
        body = '<tr><td colspan="4">none</td></tr>'
    return (
        f"<div><h3>{escape(title)}</h3><table><thead><tr><th>query</th><th>{escape(a)}</th>"
        f"<th>{escape(b)}</th><th>Δ</th></tr></thead><tbody>{body}</tbody></table></div>"
    )


def _query_label(qid: str, texts: dict[str, str]) -> str:
    text = texts.get(qid)
    return f'<span class="qid">{escape(qid)}</span> {escape(text)}' if text else escape(qid)


def _p_text(rows: list[tuple[str, float, float]]) -> str:
    """The paired randomisation test's p-value of the mean difference, for the stats line."""
    if not rows:
        return "–"
    return format_p(paired_randomization([va for _, va, _ in rows], [vb for _, _, vb in rows]))


def _wins_losses(a: ModeResult, b: ModeResult, texts: dict[str, str], metric: str = "ndcg@10") -> str:
    """How ``b`` does against ``a`` query by query: counts, a sorted difference chart, the extremes."""
    shared = [q for q in a.per_query if q in b.per_query]
    rows = [(q, a.per_query[q].get(metric, 0.0), b.per_query[q].get(metric, 0.0)) for q in shared]
    diffs = [(q, va, vb, vb - va) for q, va, vb in rows]
    wins = sorted((r for r in diffs if r[3] > 1e-9), key=lambda r: -r[3])
    losses = sorted((r for r in diffs if r[3] < -1e-9), key=lambda r: r[3])
    mean = sum(r[3] for r in diffs) / len(diffs) if diffs else 0.0
    stats = (
        f'<div class="stats"><span><b class="win">{len(wins)}</b>{escape(b.mode)} better</span>'
        f"<span><b>{len(diffs) - len(wins) - len(losses)}</b>ties</span>"
        f'<span><b class="loss">{len(losses)}</b>{escape(a.mode)} better</span>'
        f"<span><b>{mean:+z.3f}</b>mean Δ</span>"
        f"<span><b>{_p_text(rows)}</b>p (paired randomisation)</span></div>"
    )
    chart = diff_bars([(q, d) for q, _, _, d in diffs], label=f"per-query {metric}: {b.mode} minus {a.mode}")
    tops = (
        f'<div class="tops">{_top_table("Biggest wins for " + b.mode, wins[:TOP_N], a.mode, b.mode, "win", texts)}'
        f"{_top_table('Biggest losses for ' + b.mode, losses[:TOP_N], a.mode, b.mode, 'loss', texts)}</div>"
    )
    title = (
        f"Per-query nDCG@10: {escape(b.mode)} vs {escape(a.mode)}<small>Δ = {escape(b.mode)} − {escape(a.mode)}</small>"
    )
    return f'<section class="card"><h2>{title}</h2>{stats}{chart}{tops}</section>'


def _header(report: EvalReport) -> str:
    s = report.settings
    facts = [
        ("queries", s.get("num_queries", max((m.num_queries for m in report.modes), default=0))),
        ("k", report.k),
        ("depth", s.get("depth")),
        ("kind", s.get("kind")),
    ]
    facts += [(key, s[key]) for key in ("profile", "namespace", "model") if s.get(key) is not None]
    if s.get("finished_at"):
        facts.append(("finished", s["finished_at"]))
    meta = " · ".join(f"{escape(str(name))} <b>{escape(str(value))}</b>" for name, value in facts if value is not None)
    return (
        f"<header><h1>Retrieval evaluation <span>— {escape(report.dataset)}</span></h1>"
        f'<p class="meta">{meta}</p></header>'
    )


def render_html(report: EvalReport, compare_modes: tuple[str, str] | None = None) -> str:
    """The report as a self-contained HTML page: metric table, bar charts, recall@k, wins/losses.

    ``compare_modes=(a, b)`` chooses the per-query comparison (b against a); by default the first
    and last modes of the report are compared, and the section is left out with a single mode.
    """
    if not report.modes:
        raise UsageError("the report has no mode to render")
    colors = mode_colors(report.mode_names)
    pair = _pick_pair(report, compare_modes)
    parts = [
        _header(report),
        f'<section class="card"><h2>Metrics<small>mean over queries; best per column highlighted</small></h2>'
        f"{_metric_table(report, colors)}</section>",
        '<div class="row">'
        f'<section class="card"><h2>Quality by mode</h2>{_quality_chart(report, colors)}</section>'
        f'<section class="card"><h2>Recall@k<small>k on a log scale</small></h2>'
        f"{_recall_chart(report, colors)}</section>"
        "</div>",
        _wins_losses(*pair, report.queries) if pair else "",
        "<footer>kbctl eval · metrics with trec_eval semantics</footer>",
    ]
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>kbctl eval — {escape(report.dataset)}</title><style>{CSS}</style></head>"
        f"<body><main>{''.join(parts)}</main></body></html>\n"
    )
