"""Post-retrieval query-performance predictors (NQC, WIG) as the bounded-feedback decision, simulated.

    python bench/prf_predictors.py record --home /tmp/kbctl-bench --evaldata DIR --out RECORDS_DIR
    python bench/prf_predictors.py simulate RECORDS_DIR [--top 15]
    python bench/prf_predictors.py terms RECORDS_DIR [--table]
    python bench/prf_predictors.py depth record --out DEPTH_DIR
    python bench/prf_predictors.py depth simulate DEPTH_DIR [--check]

``record`` searches every judged query of each collection (SciFact test and train, Cranfield, CISI,
ADI: the benchmark home's namespaces ``scifact``, ``cranfield``, ``cisi``, ``adi``, only read) twice,
with the eval's own metric search (``kb.search(q, ns, mode="hybrid", k=100, per_doc=1,
correct=False)``, so each figure is ``kbctl eval run``'s): plain hybrid (``prf="off"``) and bounded
feedback on every query (``prf="rescore"`` with the agreement band forced open). It keeps per
query both runs' nDCG@10, the lanes' agreement, the number of analysed query terms and each lane's
first-round scores (its first 50 documents at their best chunk, the mean over every chunk it
returned), one JSON file a collection in ``RECORDS_DIR`` (research data: keep it out of the
repository).

``simulate`` reads them and, for each rule of docs/retrieval-quality.md's eleventh lever, takes per
query the feedback result where the rule says so and the plain one elsewhere (exact: a query's
result depends only on its own decision). It first prints the shipped default (the band 0.1–0.5)
so it can be checked against ``kbctl eval run``, then the grid's best cells by the dev objective
(the mean of SciFact's pooled and Cranfield's means), each with its paired randomisation test
against the shipped default on the pooled dev queries and the held-out collections' figures.

``terms`` is the twelfth lever (expansion terms against the query vector), ``depth`` the
thirteenth (feedback reorders only the first round's top N documents): its ``record`` is
``record`` keeping both runs' ranked document keys, its ``simulate`` scores each N's ranking with
``evaluate``, after checking that N = all and plain hybrid give back the recorded figures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

LANES = ("lexical", "dense")
KS = (5, 10, 20, 50)
KEEP = max(KS)
BAND = (0.1, 0.5)
# (record name, collection folder, namespace, qrels split)
COLLECTIONS = (
    ("scifact-test", "scifact", "scifact", "test"),
    ("scifact-train", "scifact", "scifact", "train"),
    ("cranfield", "cranfield", "cranfield", "test"),
    ("cisi", "cisi", "cisi", "test"),
    ("adi", "adi", "adi", "test"),
)
DEV = {"scifact": ("scifact-test", "scifact-train"), "cranfield": ("cranfield",)}
HELD_OUT = ("cisi", "adi")


def _lane_scores(hits) -> dict:
    """A lane's first ``KEEP`` documents' scores (best chunk each) and the mean of all its chunks."""
    seen, top = set(), []
    for h in hits:
        d = (h.namespace_id, h.document_id if h.document_id is not None else ("chunk", h.chunk_id))
        if d not in seen:
            seen.add(d)
            top.append(float(h.score))
            if len(top) >= KEEP:
                break
    scores = [float(h.score) for h in hits]
    return {"top": top, "mean": sum(scores) / len(scores) if scores else 0.0, "chunks": len(scores)}


def record(home: str, evaldata: Path, out: Path, only: list[str] | None, rankings: bool = False) -> None:
    """The two runs of every query (module docstring); with ``rankings``, each run's ranked
    document keys too (``plain_docs``, ``feedback_docs``: the run ``evaluate`` scored, best first)."""
    from kbctl.api.evals import _KeyResolver
    from kbctl.api.kb import open_kb
    from kbctl.evals.datasets import load_beir
    from kbctl.evals.metrics import evaluate
    from kbctl.evals.runner import rank_to_run
    from kbctl.search import engine, prf
    from kbctl.textutil.analyze import query_analyzer

    captured: dict = {}

    def open_band(lanes, n: int = 10) -> float:
        # the real agreement and the first round's lanes kept; the step then runs for every query
        captured["agreement"] = prf.lane_agreement(lanes, n)
        captured["lanes"] = {name: _lane_scores(lanes.get(name, ())) for name in LANES}
        lo, hi = BAND
        return (lo + hi) / 2

    engine.lane_agreement = open_band
    kb = open_kb(home=home)
    out.mkdir(parents=True, exist_ok=True)
    for name, folder, ns, split in COLLECTIONS:
        if only and name not in only:
            continue
        ds = load_beir(evaldata / folder, split=split)
        resolve = _KeyResolver({d for rel in ds.qrels.values() for d in rel})
        space = kb.namespaces.get(ns)
        analyzer = query_analyzer(kb.namespaces.search_profile(space, None).lexical.language, {space.analyzer})
        rows = []
        for i, q in enumerate(ds.queries, 1):
            row: dict = {"id": q.id}
            for label, mode in (("plain", "off"), ("feedback", "rescore")):
                captured.clear()
                res = kb.search(q.text, ns, mode="hybrid", k=100, per_doc=1, correct=False, prf=mode)
                docs = [(resolve(h.metadata.get("uri") or h.source), 0.0) for h in res.hits]
                run = {q.id: rank_to_run(docs, 100)}
                row[label] = evaluate(run, {q.id: ds.qrels.get(q.id, {})}, ["ndcg@10"])[q.id]["ndcg@10"]
                if rankings:
                    row[f"{label}_docs"] = list(run[q.id])
                if label == "feedback":
                    row["agreement"] = captured.get("agreement")
                    row["lanes"] = captured.get("lanes")
            row["qlen"] = len(analyzer.terms(q.text))
            rows.append(row)
            if i % 100 == 0:
                print(f"{name}: {i}/{len(ds.queries)}", file=sys.stderr, flush=True)
        (out / f"{name}.json").write_text(json.dumps(rows))
        mean = sum(r["plain"] for r in rows) / len(rows)
        print(f"{name}: {len(rows)} queries, plain {mean:.4f}", file=sys.stderr, flush=True)


# --- lever 12: expansion terms against the query vector ---------------------------------------

POOL = 50  # RM3's likeliest terms a variant chooses its expansion from


TIMED = 200  # queries whose whole pool is embedded uncached, for the step's cost


def _rm3_variant(state: dict):
    """``prf.rm3_terms`` with the expansion chosen by each candidate term's similarity to the query
    vector (``state["qvec"]``): ("filter", θ) keeps RM3's ``POOL`` likeliest terms whose embedding's
    cosine to the query vector is at least θ, then the ``n_terms`` likeliest of those, weighted as
    RM3 weights them; ("weight", γ) ranks the pool by P(w|R) × max(cos, 0)^γ and weights the
    ``n_terms`` best by it. Terms are embedded as the analyzer left them (stems) by
    ``state["embedder"]``, cached in ``state["cache"]``; the first ``TIMED`` queries embed their
    whole pool uncached and time it (``state["timings"]``)."""
    import time

    import numpy as np

    from kbctl.search import prf

    def rm3(query_terms, feedback, postings, n_terms, query_weight):
        kind, x = state["variant"]
        if not feedback or not postings:
            return prf.rm3_terms(query_terms, feedback, postings, n_terms, query_weight)
        rel = prf.relevance_model(feedback, postings)
        pool = sorted(rel.items(), key=lambda kv: (-kv[1], kv[0]))[:POOL]
        words = [t for t, _ in pool]
        cache, timings = state["cache"], state["timings"]
        todo = words if len(timings) < TIMED else [t for t in words if t not in cache]
        if todo:
            t0 = time.perf_counter()
            vecs = state["embedder"].embed_documents(todo)
            if len(timings) < TIMED:
                timings.append((time.perf_counter() - t0) * 1000)
            for t, v in zip(todo, vecs):
                cache[t] = np.asarray(v, dtype=np.float32) / (np.linalg.norm(v) or 1.0)
        q = np.asarray(state["qvec"], dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        cos = {t: float(np.dot(q, cache[t])) for t in words}
        if kind == "filter":
            top = [(t, v) for t, v in pool if cos[t] >= x][:n_terms]
        else:
            top = sorted(((t, v * max(cos[t], 0.0) ** x) for t, v in pool), key=lambda kv: (-kv[1], kv[0]))[:n_terms]
        return prf.rm3_mix(query_terms, top, query_weight)

    return rm3


def record_terms(home: str, evaldata: Path, records: Path, variants: list[tuple[str, float]]) -> None:
    """For each variant, the feedback result of every query the shipped band sends to feedback (the
    others are plain hybrid, which no variant changes), written to ``records/terms-KIND-X.json``,
    with the embedding step's uncached time per query."""
    from kbctl.api.evals import _KeyResolver
    from kbctl.api.kb import open_kb
    from kbctl.embed import get_embedder
    from kbctl.evals.datasets import load_beir
    from kbctl.evals.metrics import evaluate
    from kbctl.evals.runner import rank_to_run
    from kbctl.search import engine, feedback

    state: dict = {"cache": {}, "timings": []}
    original_rescore = feedback.rescore

    def rescore(conn, namespaces, profile, terms, qvec, *rest):
        state["qvec"] = qvec
        return original_rescore(conn, namespaces, profile, terms, qvec, *rest)

    def open_band(lanes, n: int = 10) -> float:
        return (BAND[0] + BAND[1]) / 2  # every query searched here is one the band sends to feedback

    engine.rescore = rescore
    engine.lane_agreement = open_band
    feedback.rm3_terms = _rm3_variant(state)
    kb = open_kb(home=home)
    for variant in variants:
        state["variant"] = variant
        out: dict = {}
        for name, folder, ns, split in COLLECTIONS:
            rows = json.loads((records / f"{name}.json").read_text())
            ds = load_beir(evaldata / folder, split=split)
            resolve = _KeyResolver({d for rel in ds.qrels.values() for d in rel})
            if "embedder" not in state:
                profile = kb.namespaces.search_profile(kb.namespaces.get(ns), None)
                state["embedder"] = get_embedder(profile, purpose="query")
            text = {q.id: q.text for q in ds.queries}
            got = {}
            for r in rows:
                if not in_band(r):
                    continue
                res = kb.search(text[r["id"]], ns, mode="hybrid", k=100, per_doc=1, correct=False, prf="rescore")
                docs = [(resolve(h.metadata.get("uri") or h.source), 0.0) for h in res.hits]
                run = {r["id"]: rank_to_run(docs, 100)}
                got[r["id"]] = evaluate(run, {r["id"]: ds.qrels.get(r["id"], {})}, ["ndcg@10"])[r["id"]]["ndcg@10"]
            out[name] = got
            print(f"{variant} {name}: {len(got)} queries", file=sys.stderr, flush=True)
        (records / f"terms-{variant[0]}-{variant[1]}.json").write_text(json.dumps(out))
    ms = sorted(state["timings"])
    timing = {"p50": ms[len(ms) // 2], "p95": ms[int(len(ms) * 0.95)], "queries": len(ms), "pool": POOL}
    (records / "terms-embed-ms.json").write_text(json.dumps(timing))
    print(f"embedding the pool: {timing}", file=sys.stderr)


# --- simulation -------------------------------------------------------------------------------


def nqc(lane: dict, k: int) -> float:
    top = lane["top"][:k]
    if len(top) < 2 or not lane["mean"]:
        return 0.0
    m = sum(top) / len(top)
    return math.sqrt(sum((s - m) ** 2 for s in top) / len(top)) / lane["mean"]


def wig(lane: dict, k: int, qlen: int) -> float:
    top = lane["top"][:k]
    if not top:
        return 0.0
    return (sum(top) / len(top) - lane["mean"]) / math.sqrt(max(qlen, 1))


def predictor(row: dict, kind: str, lane: str, k: int) -> float | None:
    if not row.get("lanes"):
        return None
    data = row["lanes"][lane]
    return nqc(data, k) if kind == "nqc" else wig(data, k, row["qlen"])


def in_band(row: dict) -> bool:
    a = row.get("agreement")
    return a is not None and BAND[0] <= a <= BAND[1]


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def load_records(folder: Path) -> dict[str, list[dict]]:
    """``record``'s rows, per collection."""
    return {name: json.loads((folder / f"{name}.json").read_text()) for name, *_ in COLLECTIONS}


def outcome(records: dict, decide) -> dict[str, list[float]]:
    """Per collection, each query's nDCG@10 under the decision ``decide(row) -> bool``."""
    return {
        name: [r["feedback"] if r.get("lanes") is not None and decide(r) else r["plain"] for r in rows]
        for name, rows in records.items()
    }


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def figures(per: dict[str, list[float]]) -> dict[str, float]:
    out = {name: mean(v) for name, v in per.items()}
    scifact = per["scifact-test"] + per["scifact-train"]
    out["scifact-pooled"] = mean(scifact)
    out["objective"] = (out["scifact-pooled"] + out["cranfield"]) / 2
    return out


def dev_pooled(per: dict[str, list[float]]) -> list[float]:
    return per["scifact-test"] + per["scifact-train"] + per["cranfield"]


def simulate(folder: Path, top: int) -> None:
    from kbctl.evals.metrics import format_p, paired_randomization

    records = load_records(folder)
    plain = figures(outcome(records, lambda r: False))
    every = figures(outcome(records, lambda r: True))
    shipped_per = outcome(records, in_band)
    shipped = figures(shipped_per)
    cols = ("objective", "scifact-test", "scifact-train", "cranfield", "cisi", "adi")
    print("| rule | " + " | ".join(cols) + " | feedback taken (dev) |")
    print("|---|" + "---|" * (len(cols) + 1))
    dev_rows = [r for name in ("scifact-test", "scifact-train", "cranfield") for r in records[name]]
    for label, fig, taken in (
        ("plain hybrid", plain, 0),
        ("feedback on every query", every, sum(r.get("lanes") is not None for r in dev_rows)),
        ("shipped band 0.1–0.5", shipped, sum(in_band(r) for r in dev_rows)),
    ):
        print(f"| {label} | " + " | ".join(f"{fig[c]:.4f}" for c in cols) + f" | {taken} |")
    base = dev_pooled(shipped_per)
    cells = []
    for kind in ("nqc", "wig"):
        for lane in LANES:
            for k in KS:
                values = [v for r in dev_rows if (v := predictor(r, kind, lane, k)) is not None]
                for p in range(10, 100, 10):
                    t = percentile(values, p)
                    for direction in ("≥", "≤"):
                        for placement in ("in band", "no band"):

                            def decide(r, kind=kind, lane=lane, k=k, t=t, direction=direction, placement=placement):
                                v = predictor(r, kind, lane, k)
                                ok = v >= t if direction == "≥" else v <= t
                                return ok and (placement == "no band" or in_band(r))

                            per = outcome(records, decide)
                            fig = figures(per)
                            taken = sum(r.get("lanes") is not None and decide(r) for r in dev_rows)
                            cells.append(
                                (fig["objective"], f"{kind} {lane} k{k} {direction} p{p} {placement}", fig, per, taken)
                            )
    cells.sort(key=lambda c: -c[0])
    print(f"\n{len(cells)} cells; the best {top} by the dev objective (shipped {shipped['objective']:.5f}):\n")
    print("| rule | objective (Δ, p) | " + " | ".join(cols[1:]) + " | feedback taken (dev) |")
    print("|---|---|" + "---|" * len(cols))
    for obj, label, fig, per, taken in cells[:top]:
        p = paired_randomization(base, dev_pooled(per))
        print(
            f"| {label} | {obj:.5f} ({obj - shipped['objective']:+.5f}, p {format_p(p)}) | "
            + " | ".join(f"{fig[c]:.4f}" for c in cols[1:])
            + f" | {taken} |"
        )
    passing = [
        c
        for c in cells
        if c[0] >= shipped["objective"] + 0.001
        and c[2]["scifact-test"] >= 0.745
        and c[2]["cranfield"] >= 0.43
        and c[2]["cisi"] >= 0.462
        and paired_randomization(base, dev_pooled(c[3])) < 0.05
    ]
    print(f"\ncells passing the written conditions (cost aside): {len(passing)}")
    for obj, label, fig, _, _taken in passing[:top]:
        print(f"  {label}: objective {obj:.5f}, ADI {fig['adi']:.4f}, CISI {fig['cisi']:.4f}")
    for placement in ("in band", "no band"):
        best = max((c for c in cells if c[1].endswith(placement)), key=lambda c: c[0])
        print(f"best {placement}: {best[1]} {best[0]:.5f}")
    for kind in ("nqc", "wig"):
        for lane in LANES:
            best = max((c for c in cells if c[1].startswith(f"{kind} {lane}")), key=lambda c: c[0])
            print(f"best {kind} {lane}: {best[1]} {best[0]:.5f} (ADI {best[2]['adi']:.4f}, CISI {best[2]['cisi']:.4f})")


def terms_table(folder: Path) -> None:
    """Lever 12's cells (``record_terms``): the band as shipped, each variant's feedback result
    inside it, against the shipped default."""
    from kbctl.evals.metrics import format_p, paired_randomization

    records = load_records(folder)
    shipped_per = outcome(records, in_band)
    shipped = figures(shipped_per)
    base = dev_pooled(shipped_per)
    cols = ("scifact-test", "scifact-train", "cranfield", "cisi", "adi")
    print("| expansion terms | objective (Δ, p) | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    print(
        f"| shipped (RM3's 10 likeliest) | {shipped['objective']:.5f} | "
        + " | ".join(f"{shipped[c]:.4f}" for c in cols)
        + " |"
    )
    for path in sorted(folder.glob("terms-*-*.json")):
        if path.name == "terms-embed-ms.json":
            continue
        got = json.loads(path.read_text())
        per = {name: [got[name][r["id"]] if in_band(r) else r["plain"] for r in rows] for name, rows in records.items()}
        fig = figures(per)
        p = paired_randomization(base, dev_pooled(per))
        label = path.stem[len("terms-") :]
        print(
            f"| {label} | {fig['objective']:.5f} ({fig['objective'] - shipped['objective']:+.5f}, p {format_p(p)}) | "
            + " | ".join(f"{fig[c]:.4f}" for c in cols)
            + " |"
        )
    cost = folder / "terms-embed-ms.json"
    if cost.exists():
        print(f"embedding the pool per query (uncached): {json.loads(cost.read_text())}")


# --- lever 13: feedback reorders only the first round's head -----------------------------------

DEPTHS = (10, 15, 20, 30, 50, None)  # None: every document (the feedback ranking as shipped)


def head_reordered(first: list[str], feedback: list[str], n: int | None) -> list[str]:
    """The first round's top ``n`` documents in the feedback ranking's order, then the first
    round's documents below ``n`` in its own order. A head document the feedback ranking does not
    include (it ranked it below its last) follows the head documents it includes, in the first
    round's order. ``n`` None: the feedback ranking unchanged."""
    if n is None:
        return list(feedback)
    head = first[:n]
    inside = set(head)
    ranked = [d for d in feedback if d in inside]
    placed = set(ranked)
    return ranked + [d for d in head if d not in placed] + first[n:]


def _ndcg10(rankings: dict[str, list[str]], qrels: dict) -> dict[str, float]:
    """Each query's nDCG@10 of its ranking, as ``record`` scores a search."""
    from kbctl.evals.metrics import evaluate
    from kbctl.evals.runner import rank_to_run

    run = {qid: rank_to_run([(d, 0.0) for d in docs], 100) for qid, docs in rankings.items()}
    scored = evaluate(run, {qid: qrels.get(qid, {}) for qid in rankings}, ["ndcg@10"])
    return {qid: v["ndcg@10"] for qid, v in scored.items()}


def depth_table(folder: Path, evaldata: Path, check_only: bool) -> None:
    """Lever 13's cells from ``depth record``'s folder: inside the shipped band each query's
    ranking is ``head_reordered`` at N, outside it plain hybrid (every figure scored again from the
    recorded rankings); every cell against the shipped default. The check first, before any cell
    is computed: plain hybrid and N = all must give every query's recorded nDCG@10 back, and their
    means are printed."""
    from kbctl.evals.datasets import load_beir
    from kbctl.evals.metrics import format_p, paired_randomization

    records = load_records(folder)
    qrels = {name: load_beir(evaldata / fold, split=split).qrels for name, fold, _ns, split in COLLECTIONS}

    def at(n: int | None) -> dict[str, list[dict]]:
        """The rows with ``plain`` and ``feedback`` scored from the rankings, feedback's at N."""
        out = {}
        for name, rows in records.items():
            plain = _ndcg10({r["id"]: r["plain_docs"] for r in rows}, qrels[name])
            ranked = {r["id"]: head_reordered(r["plain_docs"], r["feedback_docs"], n) for r in rows}
            fb = _ndcg10(ranked, qrels[name])
            out[name] = [{**r, "plain": plain[r["id"]], "feedback": fb[r["id"]]} for r in rows]
        return out

    shipped_rows = at(None)
    wrong = [
        (name, r["id"])
        for name, rows in records.items()
        for r, again in zip(rows, shipped_rows[name])
        if abs(again["plain"] - r["plain"]) > 1e-12 or abs(again["feedback"] - r["feedback"]) > 1e-12
    ]
    cols = ("scifact-test", "scifact-train", "cranfield", "cisi", "adi")
    shipped_per = outcome(shipped_rows, in_band)
    shipped = figures(shipped_per)
    plain = figures(outcome(shipped_rows, lambda r: False))
    print(f"check: queries whose recorded nDCG@10 the rankings do not give back: {len(wrong)} {wrong[:5]}")
    print("| check | objective | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for label, fig in (("plain hybrid", plain), ("shipped (band 0.1–0.5, N = all)", shipped)):
        print(f"| {label} | {fig['objective']:.5f} | " + " | ".join(f"{fig[c]:.4f}" for c in cols) + " |")
    if check_only:
        return
    base = dev_pooled(shipped_per)
    print("\n| N | objective (Δ, p; better/worse) | " + " | ".join(cols) + " | ADI changed | dev changed | head cut |")
    print("|---|---|" + "---|" * (len(cols) + 3))
    dev_names = ("scifact-test", "scifact-train", "cranfield")
    for n in DEPTHS:
        per = outcome(at(n), in_band)
        fig = figures(per)
        p = paired_randomization(base, dev_pooled(per))
        diff = [b - a for a, b in zip(base, dev_pooled(per))]
        changed = {name: sum(abs(a - b) > 1e-12 for a, b in zip(shipped_per[name], per[name])) for name in per}
        cut = sum(
            not set(r["plain_docs"][:n]) <= set(r["feedback_docs"])
            for name in dev_names + HELD_OUT
            for r in records[name]
            if n and in_band(r)
        )
        print(
            f"| {n or 'all'} | {fig['objective']:.5f} ({fig['objective'] - shipped['objective']:+.5f}, p {format_p(p)};"
            f" {sum(d > 1e-12 for d in diff)}/{sum(d < -1e-12 for d in diff)}) | "
            + " | ".join(f"{fig[c]:.4f}" for c in cols)
            + f" | {changed['adi']} | {sum(changed[c] for c in dev_names)} | {cut if n else '–'} |"
        )
    print("(changed: queries whose nDCG@10 differs from the shipped default's; head cut: queries in the band")
    print(" with a head document outside the feedback ranking's 100, placed after the others)")


def _sources(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", default="/tmp/kbctl-bench")
    parser.add_argument("--evaldata", type=Path, default=Path("../shared/evaldata"))


def _recording(parser: argparse.ArgumentParser) -> None:
    _sources(parser)
    parser.add_argument("--out", type=Path, required=True, help="a folder outside the repository")
    parser.add_argument("--only", help="comma-separated record names (" + ", ".join(c[0] for c in COLLECTIONS) + ")")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    _recording(sub.add_parser("record", help="search every query twice and keep what the rules need"))
    sim = sub.add_parser("simulate", help="every rule of the grid from the records")
    sim.add_argument("records", type=Path)
    sim.add_argument("--top", type=int, default=15)
    terms = sub.add_parser("terms", help="lever 12: expansion terms chosen by their similarity to the query vector")
    terms.add_argument("records", type=Path, help="the folder ``record`` wrote")
    _sources(terms)
    terms.add_argument(
        "--variants", default="filter:0.2,filter:0.3,weight:1,weight:2", help="KIND:X,… (filter θ, weight γ)"
    )
    terms.add_argument("--table", action="store_true", help="only print the table of the variants recorded")
    depth = sub.add_parser("depth", help="lever 13: feedback reorders only the first round's top N documents")
    steps = depth.add_subparsers(dest="step", required=True)
    _recording(steps.add_parser("record", help="record, keeping both runs' ranked document keys"))
    dsim = steps.add_parser("simulate", help="every N from the records, after the check")
    dsim.add_argument("records", type=Path, help="the folder ``depth record`` wrote")
    dsim.add_argument("--evaldata", type=Path, default=Path("../shared/evaldata"))
    dsim.add_argument("--check", action="store_true", help="only the check (plain hybrid and N = all)")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args.home, args.evaldata, args.out, args.only.split(",") if args.only else None)
    elif args.cmd == "simulate":
        simulate(args.records, args.top)
    elif args.cmd == "depth" and args.step == "record":
        record(args.home, args.evaldata, args.out, args.only.split(",") if args.only else None, rankings=True)
    elif args.cmd == "depth":
        depth_table(args.records, args.evaldata, args.check)
    else:
        if not args.table:
            variants = [(v.split(":")[0], float(v.split(":")[1])) for v in args.variants.split(",")]
            record_terms(args.home, args.evaldata, args.records, variants)
        terms_table(args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
