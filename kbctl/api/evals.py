"""``kb.evals``: evaluation against a knowledge base: import collections, evaluate, sweep.

``kbctl.evals`` is pure (metrics, datasets, runner, report) and never touches the database; this
module connects it to a ``KnowledgeBase``: it imports a BEIR corpus through the normal pipeline and
turns ``kb.search`` into the document-level search function the runner scores (``search_fn``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..errors import ConfigError, NamespaceNotFound, UsageError
from ._boundary import Part, psycopg_boundary

if TYPE_CHECKING:
    from ..config import Profile
    from ..evals import CompareRow, EvalDataset, EvalReport, Gate
    from ..ingest.pipeline import Progress, RunReport
    from ..types import Principal

__all__ = ["Evals", "search_fn", "MODES", "EvalRun", "compare_reports", "convert_smart"]

# "prf": hybrid search with pseudo-relevance feedback (prf = "hybrid"), the quality mode.
# "hybrid" is what a search with no flags does (the profile's prf); "plain" is hybrid without
# feedback; "rescore" hybrid with bounded feedback (prf = "rescore"); "prf" two full rounds of
# feedback (prf = "hybrid").
MODES = ("lexical", "dense", "hybrid", "plain", "rescore", "rerank", "prf")


class _KeyResolver:
    """Maps stored document URIs to the ids a dataset's judgements use.

    BEIR ids are the URIs themselves. Golden files name documents by path relative to the corpus
    root (``support/billing/refunds.md``), and messages or feed entries as ``path#id``; an
    attachment counts as its parent message.
    """

    def __init__(self, keys: set[str]) -> None:
        self.keys = keys
        self.by_fragment = {k.split("#", 1)[1]: k for k in keys if "#" in k}
        self.cache: dict[str, str] = {}

    def __call__(self, uri: str) -> str:
        if uri not in self.cache:
            self.cache[uri] = self._resolve(uri)
        return self.cache[uri]

    def _resolve(self, uri: str) -> str:
        if uri in self.keys:
            return uri
        path = uri[len("file://") :] if uri.startswith("file://") else uri
        for candidate in (path, path.split("#attachment/", 1)[0], path.split("#", 1)[0]):
            for k in self.keys:
                if candidate == k or candidate.endswith("/" + k):
                    return k
        frag = uri.split("#", 1)[-1]
        return self.by_fragment.get(frag, self.by_fragment.get(uri, uri))


class Ranked(list):
    """Documents ``[(docid, score)]`` best first, and ``passages``: the hits' passage ids best first
    (``DOC#HEADING`` as a golden set judges them, ``DOC#heading › path`` for unjudged sections);
    ``latency_ms``: the time of the search a user makes for this query (see ``search_fn``)."""

    passages: list[str]
    latency_ms: float | None = None


def _passage_matcher(dataset) -> Callable[[str, Sequence[str]], str]:
    """(document key, heading path) → the judged passage id it belongs to, or its own id."""
    judged: dict[str, dict[str, str]] = {}
    for rel in getattr(dataset, "passage_qrels", {}).values():
        for key in rel:
            doc, _, heading = key.rpartition("#")
            judged.setdefault(doc, {})[heading.strip()] = key

    def match(doc: str, heading: Sequence[str]) -> str:
        path = " › ".join(heading)
        names = judged.get(doc, {})
        for h in (path, *reversed(heading)):
            if h in names:
                return names[h]
        return f"{doc}#{path}"

    return match


def search_fn(kb, dataset, namespace: str | None, depth: int, extra: dict | None = None) -> Callable:
    """``search(query, mode) -> [(docid, score)]`` at document level (best chunk's rank).

    When the dataset judges passages, every chunk is kept (``per_doc=0``) and the result also
    carries the passage order (``Ranked.passages``); a document's rank is still its best chunk's.

    Latency: each query is first searched as ``kbctl search`` would (the profile's k, default
    options, the same mode), and that call's time is the query's latency (``Ranked.latency_ms``, which
    the runner reports); the search at ``depth`` that the metrics are computed from follows, untimed.
    Only the second is audited (``[audit]``, a run made as a principal): the first one's hits are
    not read (``Searching.timed``), so each query and mode is one audit row.
    Timing the depth-100 search instead reported ten times the rows fetched, shaped and cited, so
    the eval's latency columns disagreed with the latency benchmark (docs/retrieval-quality.md).
    """
    keys = {d for rel in dataset.qrels.values() for d in rel}
    resolve = _KeyResolver(keys)
    extra = dict(extra or {})
    with_passages = bool(getattr(dataset, "passage_qrels", None))
    passage_of = _passage_matcher(dataset)

    def search(q, mode: str) -> list[tuple[str, float]]:
        ns = q.namespace or namespace
        if not ns:
            raise UsageError(f"query {q.id} has no namespace", hint="pass --namespace")
        kwargs: dict[str, Any] = dict(extra)
        lane = mode
        if mode == "rerank":
            lane, kwargs["rerank"] = "hybrid", True
        elif mode == "prf":
            lane, kwargs["prf"] = "hybrid", "hybrid"
        elif mode == "plain":
            lane, kwargs["prf"] = "hybrid", "off"
        elif mode == "rescore":
            lane, kwargs["prf"] = "hybrid", "rescore"
        elif mode not in MODES:
            lane = kwargs.pop("lane", "hybrid")
        latency = kb.searching.timed(q.text, ns, mode=lane, **kwargs)  # not audited: its hits are not read
        res = kb.search(q.text, ns, mode=lane, k=depth, per_doc=0 if with_passages else 1, correct=False, **kwargs)
        out, seen = Ranked(), set()
        out.passages, out.latency_ms = [], latency
        for h in res.hits:
            key = resolve(h.metadata.get("uri") or h.source)
            if with_passages:
                out.passages.append(passage_of(key, h.metadata.get("heading_path") or []))
            if key not in seen:
                seen.add(key)
                out.append((key, float(h.score) if h.score is not None else 0.0))
        return out

    return search


@dataclass(frozen=True)
class EvalRun:
    """One ``kb.evaluate``: the report, the gates it failed and, with a baseline, the comparison."""

    report: EvalReport
    gates: tuple[Gate, ...] = ()
    gate_failures: tuple[str, ...] = ()
    comparison: tuple[CompareRow, ...] = ()
    regressions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the dataset held that was not evaluated (``EvalDataset.notes``)

    @property
    def failures(self) -> list[str]:
        """Failed gates, then regressions against the baseline, as readable lines."""
        return [*self.gate_failures, *self.regressions]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (settings, metrics and per-query scores): a later run's baseline. With
        more than one mode, ``versus``: each mode against the first (nDCG@10, paired test); with a
        baseline, ``comparison`` (every metric's delta and p-value) and ``regressions``, so a reader
        of the JSON sees what the exit code says."""
        from ..evals import report_to_json

        out = report_to_json(self.report)
        names = self.report.mode_names
        if len(names) > 1:
            out["versus"] = [dataclasses.asdict(self.report.versus(names[0], b)) for b in names[1:]]
        if self.comparison:
            out["comparison"] = [dataclasses.asdict(r) for r in self.comparison]
            out["regressions"] = list(self.regressions)
        if self.gates:
            out["gate_failures"] = list(self.gate_failures)
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def html(self) -> str:
        """A self-contained HTML report comparing the first two modes."""
        from ..evals import render_html

        names = self.report.mode_names
        return render_html(self.report, (names[0], names[1]) if len(names) >= 2 else None)

    def write_junit(self, path: Path) -> None:
        """JUnit XML of the gates: one testcase per mode and gate."""
        from ..evals import write_junit

        write_junit(self.report, self.gates, path)


class SweepResults(list):
    """``kb.sweep``'s (settings, metric) pairs, best first (a list, as before), with ``notes``: what the
    dataset held that was not evaluated (``EvalDataset.notes``, as ``EvalRun.notes``)."""

    notes: tuple[str, ...] = ()


@psycopg_boundary
class Evals(Part):
    """Measure retrieval quality (``kbctl eval``): import a collection, evaluate, sweep."""

    def import_beir(
        self, path: str | Path, namespace: str, *, profile: str | None = None, progress: Progress | None = None
    ) -> RunReport:
        """Ingest a BEIR ``corpus.jsonl`` (or ``corpus.jsonl.gz``) as documents keyed by their ``_id``
        (incremental, the normal pipeline).

        ``report.details["notes"]`` says, one line each, what the collection holds that a search
        cannot find: the records with neither title nor text (skipped: there is nothing to index;
        they are not failures), the ``_id``s given more than once (the first record is kept), and
        per qrels split the relevant documents it did not store (not in the corpus, or empty): the
        metrics count them as missed, as trec_eval and BEIR do."""
        from ..evals import beir_relevant_documents, check_beir_corpus, iter_beir_corpus, qrels_file

        check_beir_corpus(Path(path))  # before the tenant or the namespace is made
        self.session.writing()

        judged = beir_relevant_documents(Path(path))
        wanted = set().union(*judged.values()) if judged else set()
        present: set[str] = set()
        empty: list[str] = []

        def records():
            for d in iter_beir_corpus(Path(path)):
                if not d["title"].strip() and not d["text"].strip():
                    empty.append(d["_id"])
                    continue
                if d["_id"] in wanted:
                    present.add(d["_id"])
                yield {"id": d["_id"], "title": d["title"], "text": d["text"], "metadata": d["metadata"]}

        report = self.kb.ingestion.ingest_records(records(), namespace, profile=profile, progress=progress)
        repeated = [w.source for w in report.warnings if w.error_class == "DuplicateSourceWarning"]
        notes = []
        if empty:
            notes.append(f"skipped {_count(empty, 'record', 'records')} with neither title nor text: {_ids(empty)}")
        if repeated:
            notes.append(f"{len(repeated)} _id given more than once: {_ids(repeated)} (the first record kept)")
        for split, docs in judged.items():
            missing = sorted(docs - present)
            if missing:
                notes.append(
                    f"qrels/{qrels_file(Path(path), split).name} judges {_count(missing, 'relevant document', 'relevant documents')}"
                    f" that {'is' if len(missing) == 1 else 'are'} not in the corpus or"
                    f" {'has' if len(missing) == 1 else 'have'} neither title nor text: {_ids(missing)}"
                    f" ({'it counts' if len(missing) == 1 else 'they count'} as missed)"
                )
        report.details["notes"] = notes
        return report

    def dataset(
        self, dataset: str | Path, *, namespace: str | None = None, split: str = "test", limit: int | None = None
    ) -> EvalDataset:
        """The dataset ``evaluate`` would read with these arguments, read now, so that what it would
        refuse (no such file, not a dataset, a line that cannot be read, no query of ``namespace``,
        a ``limit`` below 1) is refused before work that comes first: the shadow a
        ``kbctl reembed --swap --eval`` builds. ``evaluate`` takes what it returns as its ``dataset``."""
        from ..evals import load_dataset

        _check_limit(limit)
        ds = load_dataset(Path(dataset), split=split)
        if namespace:  # only NS's queries, once NS is known to exist
            self.kb.namespaces.get(namespace)
            ds = ds.of_namespace(namespace)
        return ds

    def evaluate(
        self,
        dataset: str | Path | EvalDataset,
        *,
        namespace: str | None = None,
        modes: Sequence[str] = ("lexical", "dense", "hybrid"),
        k: int = 10,
        depth: int = 100,
        split: str = "test",
        limit: int | None = None,
        gates: Sequence[str] = (),
        baseline: str | Path | Mapping[str, Any] | None = None,
        tolerance: float = 0.01,
        principal: Principal | None = None,
        generation: str | None = None,
        alpha: float | None = None,
    ) -> EvalRun:
        """Score each search mode on a dataset's queries, then check ``gates`` and a ``baseline``.

        ``dataset`` is a BEIR folder or a golden JSONL file (or one read by ``dataset()``); a gate reads ``ndcg@10=0.65`` or
        ``hybrid:recall@10=0.8``; ``baseline`` is an earlier report (its JSON, or the file), and a
        quality metric more than ``tolerance`` below it is a regression (with ``alpha``, only if a paired
        randomisation test over the queries also finds the drop significant, p < alpha). ``run.ok`` is False when a
        gate fails or a metric regressed. ``principal``: the queries are searched as this principal
        (hits they may not view are withheld, as in ``search``). ``generation``: search the
        namespace's ``shadow`` (or ``previous``) generation instead of the active one.
        Gates and the baseline are read before any query runs, so a typo fails at once. ``run.notes``
        says what the dataset held that was not evaluated (a BEIR folder's unjudged queries without
        a text, judged queries missing from its queries file).
        """
        from ..evals import (
            EvalDataset,
            check_alpha,
            check_comparable,
            check_gates,
            check_gates_can_be_read,
            compare,
            computed_metrics,
            load_dataset,
            parse_gate,
            run_eval,
            unmatched_metrics,
        )

        _check_run(modes, limit, tolerance, k, depth)
        ds = dataset if isinstance(dataset, EvalDataset) else load_dataset(Path(dataset), split=split)
        parsed = tuple(parse_gate(g) for g in gates)
        check_gates_can_be_read(parsed, list(dict.fromkeys(modes)), computed_metrics(k, bool(ds.passage_qrels)))
        base = _read_baseline(baseline) if baseline is not None else None
        check_alpha(alpha)  # before any query runs, as a typo in a gate
        ns = namespace or (ds.queries[0].namespace if ds.queries else None)
        if namespace:  # only NS's queries (a golden set names each query's namespace), once NS is known to exist
            self.kb.namespaces.get(namespace)
            ds = ds.of_namespace(namespace)
        self._check_searchable(namespace, ds.limited(limit))
        if "rerank" in modes:
            self._check_reranker(namespace, ds.limited(limit), generation)
        settings = {"namespace": namespace, "profile": self._searched_profile(ns, generation) if ns else None}
        if ds.kind == "beir":
            settings["split"] = split
        notes = list(ds.notes)
        if base is not None:  # the same dataset, depth and queries, a mode in common: before any query runs
            scored = [q.id for q in ds.limited(limit).queries]
            notes += check_comparable(base, ds.name, depth, scored, list(dict.fromkeys(modes)))
        if principal is not None:  # the run sees only what this principal may view
            settings["principal"] = str(principal)
        extra: dict[str, Any] = {"principal": principal} if principal is not None else {}
        if generation is not None:  # the namespace's shadow (or previous) generation, not the active one
            settings["generation"] = generation
            extra["generation"] = generation
        fn = search_fn(self.kb, ds, namespace, depth, extra)
        rep = run_eval(ds, fn, list(modes), k=k, depth=depth, limit=limit, settings=settings)
        rows, regressions = compare(rep, base, tolerance, alpha) if base is not None else ([], [])
        if base is not None:  # a metric only one side computed (another -k) is left out: say so
            notes += unmatched_metrics(rep, base)
        return EvalRun(rep, parsed, tuple(check_gates(rep, parsed)), tuple(rows), tuple(regressions), tuple(notes))

    def _searched_profile(self, name: str, generation: str | None) -> str:
        """The name of the profile a search of namespace ``name`` (its ``generation``) embeds with,
        as a run's settings record it: a shadow's, not the active generation's."""
        return self._searched(name, generation).name

    def _searched(self, name: str, generation: str | None) -> Profile:
        from ..store import get_namespace

        ns = get_namespace(self._conn(), name, self.tenant, required=False)
        if ns is None:  # the search says it does not exist
            return self.kb.namespaces.profile_for(name)
        if generation in ("shadow", "previous"):
            ns = self.kb.namespaces.at_generation(ns, generation)
        return self.kb.namespaces.search_profile(ns)

    def _check_reranker(self, namespace: str | None, ds, generation: str | None) -> None:
        """Mode ``rerank`` needs a reranker in the profile of every namespace it searches: without
        one each search keeps the fused order (a note), and the row would measure plain hybrid
        under the name rerank."""
        names: dict[str, None] = dict.fromkeys(str(q.namespace or namespace) for q in ds.queries)
        for name in names:  # each has a namespace: _check_searchable refused a query without one
            prof = self._searched(name, generation)
            if (prof.rerank.kind or "cross-encoder") == "cross-encoder" and not prof.rerank.model:
                raise UsageError(
                    f"eval mode 'rerank' needs a reranker, and profile {prof.name!r} (namespace {name!r}) has none",
                    hint=f'set [profiles.{prof.name}.rerank] kind = "cross-encoder" and model = "/path/to/model",'
                    " or leave rerank out of --modes",
                )

    def _check_searchable(self, namespace: str | None, ds) -> None:
        """Before any query is searched, every namespace the run would search (``namespace``, else
        each query's own): a query without one, a namespace that does not exist (``NamespaceNotFound``)
        and one that holds no document (every query would score 0, and a gate would fail as if
        quality had dropped) are refused, not met when the run reaches their query."""
        from ..store import get_namespace
        from ..store.namespaces import document_count

        first: dict[str, str] = {}  # each namespace the run searches, with the first query searching it
        for q in ds.queries:
            name = q.namespace or namespace  # as search_fn reads it
            if not name:
                raise UsageError(f"query {q.id} has no namespace", hint="pass --namespace, or give it a namespace")
            first.setdefault(name, q.id)
        for name, qid in sorted(first.items()):
            ns = get_namespace(self._conn(), name, self.tenant, required=False)
            if ns is None:
                raise NamespaceNotFound(
                    f"namespace {name!r} of query {qid} does not exist (tenant {self.tenant!r})",
                    hint="ingest it first, or evaluate the queries of one namespace: --namespace NAME",
                )
            if document_count(self._conn(), ns.id) == 0:
                raise UsageError(
                    f"namespace {name!r} holds no documents: there is nothing to evaluate",
                    hint=f"ingest it first (kbctl eval import FOLDER -n {name}, or kbctl ingest PATH -n {name})",
                )

    def sweep(
        self,
        dataset: str | Path,
        *,
        namespace: str | None = None,
        split: str = "test",
        depth: int = 100,
        limit: int | None = None,
        grid: Mapping[str, Sequence[Any]] | None = None,
        metric: str = "ndcg@10",
    ) -> SweepResults:
        """Evaluate hybrid search over a grid of fusion settings; (settings, ``metric``) pairs, best
        first. ``results.notes`` says what the dataset held that was not evaluated (as ``run.notes``)."""
        from ..evals import computed_metrics, load_dataset, run_eval
        from ..evals.metrics import is_lower_better

        _check_run(["hybrid"], limit, 0.0, 10, depth)
        ds = load_dataset(Path(dataset), split=split)
        grid = grid or {"fusion": ["rrf"], "rrf_k": [10, 30, 60, 100], "candidates": [50, 100, 200]}
        names = list(grid)
        empty = [n for n in names if isinstance(grid[n], str) or not list(grid[n])]
        if empty:  # an empty list would leave nothing to try
            raise UsageError(f"the sweep has no {empty[0]} to try", hint="give it one value or more, comma-separated")
        from ..search.engine import check_option

        for n in names:  # each value as the search would take it (rrf_k 0 meant the profile's), before any search
            for v in grid[n]:
                check_option(n, v, "--" + n.replace("_", "-"))
        computed = computed_metrics(10, bool(ds.passage_qrels))
        metric = metric.strip().lower() if isinstance(metric, str) else metric
        if metric not in computed:  # before the first search, not after it as a KeyError
            raise UsageError(f"the sweep cannot rank by {metric!r}", hint=f"use one of: {', '.join(computed)}")
        if namespace:  # only NS's queries, as evaluate
            self.kb.namespaces.get(namespace)
            ds = ds.of_namespace(namespace)
        self._check_searchable(namespace, ds.limited(limit))  # every namespace, before the first search
        results: list[tuple[dict, float]] = []
        for values in itertools.product(*(grid[n] for n in names)):
            opts = dict(zip(names, values))
            if (
                opts.get("fusion") == "rrf"
                and "dense_weight" in opts
                and opts["dense_weight"] != grid["dense_weight"][0]
            ):
                continue  # the weight does not matter to RRF
            if opts.get("fusion") == "convex" and "rrf_k" in opts and opts["rrf_k"] != grid["rrf_k"][0]:
                continue
            label = ",".join(f"{k}={v}" for k, v in opts.items())
            fn = search_fn(self.kb, ds, namespace, depth, {"lane": "hybrid", **opts})
            rep = run_eval(ds, fn, [label], depth=depth, limit=limit)
            if metric not in rep.modes[0].metrics:  # a passage metric the hybrid search gave no passages for
                raise UsageError(f"the sweep cannot rank by {metric!r}: this search gives no passages")
            results.append((opts, rep.modes[0].metrics[metric]))
        lower = is_lower_better(metric)  # latencies: the fastest first
        out = SweepResults(sorted(results, key=lambda r: r[1] if lower else -r[1]))
        out.notes = ds.notes
        return out


def compare_reports(
    baseline: str | Path | Mapping[str, Any],
    current: str | Path | Mapping[str, Any],
    *,
    tolerance: float = 0.01,
    alpha: float | None = None,
) -> EvalRun:
    """Two saved eval results (``kbctl eval run --json``, or their JSON) compared without searching:
    each mode both hold, each metric's delta and paired randomisation p-value, and the regressions
    (a quality metric more than ``tolerance`` below the baseline; with ``alpha``, only if p < alpha).
    Needs no database: an A/B of two configurations, or of two commits, from their saved runs."""
    from ..evals import check_alpha, check_comparable, compare, report_from_json, unmatched_metrics

    check_alpha(alpha)
    base, cur = _read_baseline(baseline), _read_baseline(current, "result")
    report = report_from_json(cur)
    check_comparable(
        base,
        report.dataset,
        report.settings.get("depth"),
        list(report.queries) or list(report.modes[0].per_query if report.modes else ()),
        list(report.mode_names),
        this="the result",
    )
    rows, regressions = compare(report, base, tolerance, alpha)
    if not rows:
        raise UsageError(
            "the two results share no mode",
            hint=f"baseline: {', '.join(base['modes']) or 'none'}; result: {', '.join(report.mode_names) or 'none'}",
        )
    notes = unmatched_metrics(report, base, this="the result")
    return EvalRun(report, comparison=tuple(rows), regressions=tuple(regressions), notes=tuple(notes))


def _count(items: Sequence[str], one: str, many: str) -> str:
    return f"{len(items)} {one if len(items) == 1 else many}"


def _ids(items: Sequence[str], shown: int = 5) -> str:
    """The first ids, quoted, and how many more."""
    out = ", ".join(repr(i) for i in items[:shown])
    return out + (f" and {len(items) - shown} more" if len(items) > shown else "")


def _check_run(modes: Sequence[str], limit: int | None, tolerance: float, k: int = 10, depth: int = 100) -> None:
    """A run's own options, before the dataset is read or any query runs: each mode one kbctl knows
    (an unknown one used to run as hybrid under its name), ``k`` and ``depth`` in the search's
    1..1000 (``--depth 100000`` was refused at the first query as the search's ``-k``), a limit of
    one query or more."""
    if isinstance(modes, str) or not modes:
        raise UsageError("no modes given", hint="pass --modes, a comma list of: " + ", ".join(MODES))
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise UsageError(f"unknown eval mode {unknown[0]!r}", hint="use any of: " + ", ".join(MODES))
    for flag, value in (("-k", k), ("--depth", depth)):  # the search's range, named by the eval's flag
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
            raise UsageError(f"{flag} must be in 1..1000, got {value!r}", hint="a whole number of results")
    _check_limit(limit)
    if not tolerance >= 0:
        raise UsageError(f"tolerance must be 0 or more, got {tolerance!r}", hint="e.g. --tolerance 0.01")


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UsageError(
            f"limit must be a whole number of queries, 1 or more, got {limit!r}", hint="e.g. --limit 50, or none: all"
        )


def _read_baseline(baseline: str | Path | Mapping[str, Any], what: str = "baseline") -> Mapping[str, Any]:
    if isinstance(baseline, Mapping):
        data = baseline
    else:
        try:
            data = json.loads(Path(baseline).read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"cannot read the {what} {baseline}: {e}", hint="pass a file an earlier `kbctl eval run --json` wrote"
            ) from None
    from ..evals import report_from_json

    name = "" if isinstance(baseline, Mapping) else f" {baseline}"
    if not isinstance(data, Mapping) or not isinstance(data.get("modes"), Mapping):
        raise ConfigError(
            f"the {what}{name} is not a kbctl eval result (no 'modes' object)",
            hint="pass a file an earlier `kbctl eval run --json` wrote",
        )
    try:
        report_from_json(data)  # every mode's metrics and per-query scores numbers, as a run writes them
    except ConfigError as e:
        raise ConfigError(
            f"the {what}{name} is {e.message}", hint="pass a file an earlier `kbctl eval run --json` wrote"
        ) from None
    return data


def convert_smart(documents: str | Path, queries: str | Path, qrels: str | Path, out: str | Path, **options: Any):
    """A classic SMART-format collection (CACM, CISI, ADI, MED…) written as a BEIR folder that
    ``import_beir`` and ``evaluate`` read; its report (``kbctl.evals.smart.SmartReport``). Needs no
    database. Options: ``text_fields``, ``metadata_fields``, ``qrels_layout``,
    ``number_queries_by_position``, ``grades`` (``kbctl.evals.smart.convert_smart``)."""
    from ..evals.smart import convert_smart as convert

    return convert(Path(documents), Path(queries), Path(qrels), Path(out), **options)
