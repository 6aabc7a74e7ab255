"""``kbctl eval``: import collections, run evaluations with gates, sweep fusion settings."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import CheckFailed, UsageError
from .render import print_json, table
from .state import STATE, err, info, name_value, warn
from .terminal import printable

app = typer.Typer(help="Measure retrieval quality: import, run, sweep.", no_args_is_help=True)


@app.command("import")
def import_(
    path: Path = typer.Argument(..., help="A BEIR folder (corpus.jsonl, queries.jsonl, qrels/)."),
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace to import into."),
    profile: str = typer.Option(None, "--profile", "-p", help="Profile for a new namespace."),
    json_: bool = typer.Option(False, "--json", help="Run summary as JSON on stdout."),
) -> None:
    """Ingest a BEIR corpus (corpus.jsonl or .jsonl.gz) as documents keyed by their _id (incremental, through the normal pipeline); warns of records skipped and judged documents missing."""
    report = STATE.kb().import_beir(path, namespace, profile=profile or STATE.profile)
    if json_:
        print_json(report.to_json())
    else:
        d, c = report.documents, report.chunks
        info(
            f"imported into {namespace}: {d['new']} new, {d['changed']} changed, {d['unchanged']} unchanged,"
            f" {d['failed']} failed; {c['embedded']} chunks embedded, {c['reused']} reused; {report.seconds:.1f}s"
        )
    for note in report.details.get("notes", []):
        warn(note)
    if report.errors:
        warn(f"{len(report.errors)} record(s) failed; see `kbctl errors -n {namespace}`")


@app.command("convert-smart")
def convert_smart(
    documents: Path = typer.Argument(..., help="The documents file (cacm.all, CISI.ALL, MED.ALL …)."),
    queries: Path = typer.Argument(..., help="The queries file (query.text, CISI.QRY …)."),
    qrels: Path = typer.Argument(..., help="The judgements file (qrels.text, CISI.REL, MED.REL …)."),
    out: Path = typer.Option(..., "--out", "-o", help="A new folder for the BEIR files."),
    text: str = typer.Option(
        "W", "--text", help="Comma list of the fields that make a document's text (.T is its title)."
    ),
    metadata: str = typer.Option("", "--metadata", help="Comma list of fields kept as metadata, e.g. A,B."),
    qrels_layout: str = typer.Option(
        "auto",
        "--qrels-layout",
        help="pairs ('query doc …', every pair relevant), trec ('query 0 doc grade'), or auto.",
    ),
    by_position: bool = typer.Option(
        False, "--number-queries-by-position", help="Number queries 1, 2, … in file order (Cranfield's judgements do)."
    ),
    grades: str = typer.Option(
        "given",
        "--grades",
        help="given (pairs relevant, TREC's grade as it is) or cleverdon (Cranfield's codes 1…4, -1: grade 5 - code, -1 is 0).",
    ),
    json_: bool = typer.Option(False, "--json", help="The report as JSON on stdout."),
) -> None:
    """Convert a classic SMART-format test collection (CACM, CISI, ADI, MED …) to a BEIR folder."""
    from ..api import convert_smart as convert

    def letters(s: str) -> list[str]:
        return [x.strip() for x in s.split(",") if x.strip()]

    report = convert(
        documents, queries, qrels, out,
        text_fields=letters(text), metadata_fields=letters(metadata),
        qrels_layout=qrels_layout,  # checked by convert
        number_queries_by_position=by_position, grades=grades,  # checked by convert
    )  # fmt: skip
    if json_:
        print_json(report.to_json())
        return
    info(
        f"wrote {out}: {report.documents} documents, {report.queries} queries ({report.judged_queries} judged),"
        f" {report.judgements} judgements ({report.qrels_layout} layout)"
    )
    for reason, n in report.left_out.items():
        info(f"left out: {n} {reason}")


@app.command("import-feedback")
def import_feedback(
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace whose judged queries to export."),
    out: Path = typer.Option(..., "--out", "-o", help="Golden JSONL file to write (kbctl eval run reads it)."),
) -> None:
    """Turn the queries agents judged (record_feedback) into a golden eval dataset."""
    _writable("--out", out)  # before the store opens, as the library checks it before reading
    n = STATE.kb().import_feedback(namespace, out)
    info(f"wrote {n} judged queries to {out}")


@app.command("run")
def run(
    dataset: Path = typer.Argument(..., help="A BEIR folder, or a golden JSONL file (query, namespace, relevant)."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Namespace (golden queries carry their own)."),
    modes: str = typer.Option(
        "lexical,dense,hybrid",
        "--modes",
        help="Comma list of lexical, dense, hybrid (the default search), plain (hybrid without feedback), rescore (hybrid with bounded feedback), rerank, prf (two rounds of feedback).",
    ),
    k: int = typer.Option(10, "-k", help="Cut-off for P@k."),
    depth: int = typer.Option(100, "--depth", help="Documents retrieved per query (for Recall@100, MAP)."),
    split: str = typer.Option("test", "--split", help="qrels split for BEIR: test | train | dev."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N queries."),
    fail_under: list[str] = typer.Option(
        [], "--fail-under", help="Gate, e.g. ndcg@10=0.65 or hybrid:recall@10=0.8; exit 3 when missed."
    ),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write the full result (settings, per-query scores) here."
    ),
    baseline: Path | None = typer.Option(
        None, "--baseline", help="Earlier --json result: print deltas, fail on regression."
    ),
    tolerance: float = typer.Option(0.01, "--tolerance", help="Allowed drop against --baseline."),
    alpha: float | None = typer.Option(
        None,
        "--alpha",
        help="With --baseline: a drop past --tolerance fails only if a paired randomisation test finds it significant (p < ALPHA), e.g. 0.05.",
    ),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML of the gates here."),
    report: Path | None = typer.Option(None, "--report", help="Write a self-contained HTML report here."),
    print_json_: bool = typer.Option(False, "--print-json", help="Print the result JSON on stdout instead of a table."),
    as_: str | None = typer.Option(
        None,
        "--as",
        help="Search as this user (user:ID); hits they may not view are withheld.",
        callback=name_value,
    ),
    group: list[str] = typer.Option(
        [], "--group", "-g", help="A group the principal belongs to (repeatable).", callback=name_value
    ),
    generation: str = typer.Option(
        None, "--generation", help="Search the namespace's shadow (or previous) generation, not the active one."
    ),
) -> None:
    """Evaluate each mode on the same queries: nDCG@10, Recall@10/100, P@k, MRR@10, MAP, latency."""
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    for flag, path in (("--json", json_path), ("--report", report), ("--junit", junit)):
        _writable(flag, path)  # before the store opens and the queries run, not after
    kb = STATE.kb()
    result = kb.evaluate(
        dataset,
        namespace=namespace,
        modes=mode_list,
        k=k,
        depth=depth,
        split=split,
        limit=limit,
        gates=fail_under,
        baseline=baseline,
        tolerance=tolerance,
        alpha=alpha,
        principal=kb.principal(as_, group),
        generation=generation,
    )
    for note in result.notes:
        warn(note)
    if json_path:
        _write(json_path, "--json", lambda: json_path.write_text(json.dumps(result.to_json(), indent=1)))
    if report:
        _write(report, "--report", lambda: report.write_text(result.html()))
    if junit:
        _write(junit, "--junit", lambda: result.write_junit(junit))
    if print_json_:
        print_json(result.to_json())
    else:
        _table(result.report, k)
    if baseline and not print_json_:  # the JSON holds the comparison: stdout stays one document
        _comparison(result)
    if not result.ok:
        for f in result.failures:
            err.print(f"gate failed: {printable(f, keep='')}", highlight=False, markup=False)
        raise CheckFailed(f"{len(result.failures)} eval check(s) failed", hint="see the table above")


def _comparison(result) -> None:
    rows = [
        {
            "mode": r.mode,
            "metric": r.metric,
            "baseline": r.baseline,
            "current": r.current,
            "delta": r.delta,
            "p": r.p_text,
            "queries": r.queries or None,
        }
        for r in result.comparison
        if not r.metric.startswith("latency")
    ]
    table(rows, title="against baseline")


@app.command("compare")
def compare(
    baseline: Path = typer.Argument(..., help="The earlier result (`kbctl eval run --json`)."),
    current: Path = typer.Argument(..., help="The result to judge against it."),
    tolerance: float = typer.Option(0.01, "--tolerance", help="Allowed drop of a quality metric."),
    alpha: float | None = typer.Option(
        None, "--alpha", help="A drop past --tolerance fails only if the paired test finds it significant (p < ALPHA)."
    ),
    print_json_: bool = typer.Option(False, "--print-json", help="Print the comparison as JSON on stdout."),
) -> None:
    """Compare two saved eval results without searching: each metric's delta and paired-test p-value; exit 3 on a regression."""
    from ..api import compare_reports

    result = compare_reports(baseline, current, tolerance=tolerance, alpha=alpha)
    for note in result.notes:
        warn(note)
    if print_json_:
        data = result.to_json()
        print_json({key: data[key] for key in ("comparison", "regressions")})
    else:
        _comparison(result)
    if not result.ok:
        for f in result.failures:
            err.print(f"regression: {printable(f, keep='')}", highlight=False, markup=False)
        raise CheckFailed(f"{len(result.failures)} metric(s) regressed", hint="see the table above")


def _table(rep, k: int) -> None:
    cols = ["ndcg@10", "recall@10", "recall@100", f"p@{k}", "mrr@10", "map", "latency_ms_p50", "latency_ms_p95"]
    passage = [c for c in ("passage_ndcg@10", "passage_mrr@10") if any(c in m.metrics for m in rep.modes)]
    cols[6:6] = passage
    rows = [{"mode": m.mode, "queries": m.num_queries, **{c: m.metrics.get(c) for c in cols}} for m in rep.modes]
    table(rows, ["mode", "queries", *cols], title=f"{rep.dataset}")
    if len(rep.modes) > 1:  # is each mode's difference from the first more than noise?
        first = rep.modes[0].mode
        pairs = [rep.versus(first, m.mode) for m in rep.modes[1:]]
        table(
            [
                {
                    "mode": v.b,
                    "metric": v.metric,
                    "delta": v.delta,
                    "p": v.p_text,
                    "better": v.better,
                    "worse": v.worse,
                    "queries": v.queries,
                }
                for v in pairs
            ],
            title=f"against {first} (paired randomisation test)",
        )


@app.command("sweep")
def sweep(
    dataset: Path = typer.Argument(..., help="A BEIR folder or a golden JSONL file."),
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Namespace."),
    split: str = typer.Option("test", "--split", help="qrels split."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N queries."),
    fusion: str = typer.Option("rrf,convex", "--fusion", help="Fusion methods to try."),
    rrf_k: str = typer.Option("10,30,60,100", "--rrf-k", help="RRF k values."),
    dense_weight: str = typer.Option("0.3,0.5,0.7", "--dense-weight", help="Convex weights of the dense lane."),
    candidates: str = typer.Option("50,100,200", "--candidates", help="Candidates per lane."),
    ef_search: str = typer.Option("100", "--ef-search", help="HNSW ef_search values."),
    metric: str = typer.Option("ndcg@10", "--metric", help="Metric to rank settings by."),
) -> None:
    """Grid search over fusion, RRF k, weights, candidate depth and ef_search; prints the best settings (what the dataset left out: warnings on stderr)."""
    grid = {
        "fusion": _values("--fusion", fusion, str),
        "rrf_k": _values("--rrf-k", rrf_k, int),
        "dense_weight": _values("--dense-weight", dense_weight, float),
        "candidates": _values("--candidates", candidates, int),
        "ef_search": _values("--ef-search", ef_search, int),
    }
    results = STATE.kb().sweep(dataset, namespace=namespace, split=split, limit=limit, grid=grid, metric=metric)
    for note in results.notes:
        warn(note)
    table([{**o, metric: v} for o, v in results[:15]], title=f"best settings by {metric}")
    best = results[0][0]
    typer.echo("\n# paste into your profile ([profiles.NAME.search]):")
    for key in ("fusion", "rrf_k", "dense_weight", "candidates"):
        typer.echo(f"{key} = {json.dumps(best[key])}")
    typer.echo(f"# and [profiles.NAME.hnsw] ef_search = {best['ef_search']}")


def _values(flag: str, text: str, kind: type) -> list:
    """A comma list of values of ``kind``; one it cannot read, or none at all, is a usage error."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise UsageError(f"{flag} gives no value to try", hint=f"give {flag} one value or more, comma-separated")
    try:
        return [kind(x) for x in items]
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        bad = next(x for x in items if not _reads_as(kind, x))
        raise UsageError(
            f"{flag}: {printable(bad)!r} is not {what}", hint=f"give {flag} a comma list, e.g. {flag} 1,2"
        ) from None


def _reads_as(kind: type, text: str) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _writable(flag: str, path: Path | None) -> None:
    """A usage error unless ``path`` names a file that can be written: not a folder, in a folder
    that exists (``kbctl.api.output_file``)."""
    from ..api import output_file

    if path is not None:
        output_file(flag, path)


def _write(path: Path, flag: str, write) -> None:
    try:
        write()
    except OSError as e:
        raise UsageError(f"{flag} {printable(str(path))}: cannot write ({e.strerror or e})") from None
