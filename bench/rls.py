"""The cost of row-level security (migration 009) on lexical and hybrid search, in-process.

For every query of the sample corpus's eval file (its namespaces ingested into a scratch home) and
the first 300 SciFact queries (namespace ``scifact`` of the benchmark home), ``kb.search(q, ns,
mode=…, k=10, prf="off")`` three times after a warm-up; p50/p95/mean of the wall time per mode.
Run once on the commit before 009 and once after (the tenant's connections then ``SET ROLE`` to
the tenant's role and every table's policy applies).

    KBCTL_HOME=/tmp/kbctl-bench .venv/bin/python bench/rls.py [SAMPLE_HOME]
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import kbctl
from kbctl.evals.metrics import percentile

REPO = Path(__file__).resolve().parent.parent
ROUNDS = 3


def measure(kb, pairs: list[tuple[str, str]], mode: str) -> dict:
    kb.search(pairs[0][0], pairs[0][1], mode=mode, k=10, prf="off")
    ms = []
    for _ in range(ROUNDS):
        for q, ns in pairs:
            t0 = time.perf_counter()
            kb.search(q, ns, mode=mode, k=10, prf="off")
            ms.append((time.perf_counter() - t0) * 1000)
    return {
        "mode": mode,
        "n": len(ms),
        "p50": statistics.median(ms),
        "p95": percentile(ms, 95),
        "mean": statistics.fmean(ms),
    }


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(
        prog="bench/rls.py",
        description="The cost of row-level security on lexical and hybrid search (KBCTL_HOME: the benchmark home "
        "holding scifact; default /tmp/kbctl-bench).",
    )
    ap.add_argument(
        "sample_home",
        nargs="?",
        default="/tmp/kbctl-rls-sample",
        help="scratch home for the sample corpus's namespaces",
    )
    sample_home = ap.parse_args(argv).sample_home
    bench_home = os.environ.get("KBCTL_HOME", "/tmp/kbctl-bench")
    evals = [json.loads(x) for x in (REPO / "sample_corpus/eval/queries.jsonl").read_text().splitlines() if x.strip()]
    out = []
    with kbctl.open(home=sample_home, profile="minilm") as kb:
        have = {r["name"] for r in kb.namespaces()}
        for ns in sorted({e["namespace"] for e in evals} - have):
            kb.ingest([str(REPO / "sample_corpus")], ns, verify=False)
        pairs = [(e["query"], e["namespace"]) for e in evals]
        out += [{"corpus": "sample", **measure(kb, pairs, m)} for m in ("lexical", "hybrid")]
    qfile = REPO.parent / "shared" / "evaldata" / "scifact" / "queries.jsonl"  # as bench/common.EVALDATA
    queries = [json.loads(x)["text"] for x in qfile.read_text().splitlines() if x.strip()][:300]
    with kbctl.open(home=bench_home, profile="minilm") as kb:
        pairs = [(q, "scifact") for q in queries]
        out += [{"corpus": "scifact", **measure(kb, pairs, m)} for m in ("lexical", "hybrid")]
    for r in out:
        print(
            f"{r['corpus']:8} {r['mode']:8} n={r['n']:4} p50 {r['p50']:6.1f} ms  p95 {r['p95']:6.1f} ms  mean {r['mean']:6.1f} ms"
        )


if __name__ == "__main__":
    main()
