"""``verify_claim``'s ``evidence_found`` flag, calibrated on SciFact's claims.

    python bench/verify_claim.py [--home /tmp/kbctl-bench] [--evaldata DIR] [--limit N] [--no-write]

The tool runs in-process (``kbctl.server.tools.Toolbox``, unscoped, k = 5) on the bench store's
``scifact`` namespace (all-MiniLM-L6-v2), which is only read. Each claim with judgments is asked
twice:

- as it is: the namespace holds the claim's judged-relevant abstracts;
- with its judged-relevant abstracts filtered out (``filters=["uri!=<id>", ...]``): nothing in the
  namespace is judged evidence for it.

An answer *holds evidence* when one of its passages comes from a judged-relevant abstract (so only
answers of the first kind can, and only when retrieval found the abstract). The flag is right when
it is true exactly for the answers that hold evidence: precision is the share of flagged answers
that hold evidence, recall the share of answers holding evidence that are flagged. A passage
``supports`` when ``dense_similarity >= s`` and ``key_terms_found >= t``; (s, t) is chosen on the
train claims (qrels/train.tsv) as the pair with the best F1 (ties: the higher precision), on a grid
of 0.01 × 0.05, and reported on the test claims (qrels/test.tsv), which played no part in the choice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Env, ensure_imported, judged_queries, results_dir, save_json, script_args, write_figures

NAMESPACE = "scifact"
K = 5
SIMILARITY = [round(0.20 + 0.01 * i, 2) for i in range(61)]  # 0.20 … 0.80
TERMS = [round(0.05 * i, 2) for i in range(21)]  # 0 … 1
DOCS = ("docs/benchmarks.md", "docs/agents.md")


def toolbox(env: Env, **server: object):
    """The tools as ``kbctl serve`` runs them (unscoped), over the bench store; ``server``: [server] settings."""
    from kbctl.api import KnowledgeBase
    from kbctl.config import load_settings
    from kbctl.server.agents import agent_from_settings
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings = load_settings(
        overrides={"database.home": str(env.home), **{f"server.{k}": v for k, v in server.items()}}
    )
    service = Service(settings, KnowledgeBase)
    return Toolbox(service, agent_from_settings(settings, None), Metrics()), service


def collect(env: Env, split: str, limit: int | None = None) -> list[dict]:
    """One row per answer: the claim, whether relevant abstracts were filtered out, each passage's signals."""
    from kbctl.server.schemas import dump  # an answer as the JSON both surfaces send

    box, service = toolbox(env)
    rows = []
    try:
        claims = judged_queries(env, NAMESPACE, split)[:limit]
        for n, (qid, claim, relevant) in enumerate(claims, 1):
            for excluded in (False, True):
                filters = [f"uri!={d}" for d in sorted(relevant)] if excluded else None
                out = dump(box.verify_claim(claim, namespaces=[NAMESPACE], k=K, filters=filters))
                rows.append(
                    {
                        "claim": qid,
                        "excluded": excluded,
                        "passages": [
                            {
                                "source": e["source"],
                                "relevant": e["source"] in relevant,
                                "similarity": e["signals"]["dense_similarity"],
                                "terms": e["signals"]["key_terms_found"],
                            }
                            for e in out["evidence"]
                        ],
                    }
                )
            if n % 100 == 0:
                print(f"  {split}: {n}/{len(claims)} claims", file=sys.stderr, flush=True)
    finally:
        service.close()
    return rows


def score(rows: list[dict], s: float, t: float) -> dict:
    """Precision, recall and F1 of the flag at thresholds (s, t) against "the answer holds evidence"."""
    tp = fp = fn = 0
    for r in rows:
        flagged = any((p["similarity"] or 0) >= s and p["terms"] >= t for p in r["passages"])
        holds = any(p["relevant"] for p in r["passages"])
        tp += flagged and holds
        fp += flagged and not holds
        fn += holds and not flagged
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "answers": len(rows),
        "with evidence": tp + fn,
        "flagged": tp + fp,
        "precision": precision,
        "recall": recall,
        "F1": f1,
    }


def choose(rows: list[dict]) -> tuple[float, float]:
    """The thresholds with the best F1 on ``rows`` (ties: higher precision, then the lower thresholds)."""

    def key(st: tuple[float, float]) -> tuple:
        r = score(rows, *st)
        return (round(r["F1"], 6), r["precision"], -st[0], -st[1])

    return max(((s, t) for s in SIMILARITY for t in TERMS), key=key)


def choose_precise(rows: list[dict], target: float = 0.7) -> tuple[float, float]:
    """The thresholds with the best recall among those whose precision on ``rows`` reaches ``target``."""

    def key(st: tuple[float, float]) -> tuple:
        r = score(rows, *st)
        return (r["precision"] >= target, round(r["recall"], 6), r["precision"], -st[0], -st[1])

    return max(((s, t) for s in SIMILARITY for t in TERMS), key=key)


def _claim_level(rows: list[dict], s: float, t: float) -> dict:
    """The flag against "the namespace holds the claim's evidence" (the unfiltered answers)."""
    flagged = [any((p["similarity"] or 0) >= s and p["terms"] >= t for p in r["passages"]) for r in rows]
    tp = sum(f for f, r in zip(flagged, rows) if not r["excluded"])
    fp = sum(f for f, r in zip(flagged, rows) if r["excluded"])
    pos = sum(1 for r in rows if not r["excluded"])
    precision = tp / (tp + fp) if tp + fp else 0.0
    return {"precision": precision, "recall": tp / pos if pos else 0.0}


def measure(env: Env, limit: int | None = None, before: tuple[float, float] = (0.45, 0.5), reuse: bool = False) -> str:
    if reuse:  # the answers of the last run (save_json), to redo only the choice and the table
        saved = json.loads((results_dir(env) / "verify_claim.json").read_text())
        train, test = saved["train"], saved["test"]
    else:
        train, test = collect(env, "train", limit), collect(env, "test", limit)
        save_json(env, "verify_claim", {"train": train, "test": test})
    s, t = choose(train)
    strict = choose_precise(train, 0.7)
    table = []
    for label, (a, b) in (
        ("best F1 on train (the default)", (s, t)),
        ("precision ≥ 0.7 on train", strict),
        ("hand-picked (before calibration)", before),
    ):
        for split, rows in (("train", train), ("test", test)):
            r = score(rows, a, b)
            table.append({"thresholds": f"{label}: s = {a:.2f}, t = {b:.2f}", "claims": split, **r})
    claim_level = _claim_level(test, s, t)
    lines = [
        f"SciFact claims with judgments (train {len(train) // 2}, test {len(test) // 2}), each answered as is and"
        " with its judged-relevant abstracts filtered out; `verify_claim` k = 5 over the `scifact` namespace"
        " (all-MiniLM-L6-v2). An answer holds evidence when one of its passages is from a judged-relevant"
        " abstract; thresholds chosen for the best F1 on train.",
        "",
        "| thresholds | claims | answers | with evidence | flagged | precision | recall | F1 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['thresholds']} | {r['claims']} | {r['answers']} | {r['with evidence']} | {r['flagged']} |"
        f" {r['precision']:.3f} | {r['recall']:.3f} | {r['F1']:.3f} |"
        for r in table
    ]
    lines += [
        "",
        f'Against "the namespace holds the claim\'s evidence" instead (test, calibrated thresholds): precision'
        f" {claim_level['precision']:.3f}, recall {claim_level['recall']:.3f}.",
    ]
    return "\n".join(lines) + "\n"


def run(env: Env) -> str:
    """The ``verify`` part of ``bench/run.py``."""
    ensure_imported(env, NAMESPACE)
    return measure(env, env.queries)


def main() -> int:
    ap = script_args(__doc__, "only the first N claims of each split (a quick look)")
    ap.add_argument("--reuse", action="store_true", help="the answers of the last run: only choose and tabulate")
    args = ap.parse_args()
    env = Env(args.evaldata.resolve(), args.home.resolve())
    body = measure(env, args.limit, reuse=args.reuse)
    print(body)
    if not args.no_write and args.limit is None:
        write_figures("verify", "verify_claim.py", DOCS, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
