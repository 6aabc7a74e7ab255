"""The cost of the access gate (README "Access control") on the SciFact namespace, in-process.

For every SciFact test query, ``kb.search(q, "scifact", mode=…, k=10)`` four ways: as before the
gate existed is not measurable any more, so the baseline is the gate with nothing to withhold
(SciFact documents carry no ACL; anonymous, public namespace); then a gate that withholds a share
of the documents (by document id: 50% and 90%), so the engine must read further down the ranking
and, when the lanes run out, ask them for four times more candidates. Reports p50/p95 and how
often the page came back short of k.

    KBCTL_HOME=/tmp/kbctl-bench .venv/bin/python bench/gate.py                       # scifact
    KBCTL_HOME=/tmp/kbctl-bench .venv/bin/python bench/gate.py scale-100k \
        --config /tmp/kbctl-bench-results/scale.toml                                  # 100k chunks (bench/scale.py)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EVALDATA

import kbctl
from kbctl.evals.metrics import percentile


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("namespace", nargs="?", default="scifact")
    ap.add_argument("--config", default=None, help="config declaring the namespace's profile (scale.toml)")
    a = ap.parse_args()
    ns = a.namespace
    home = os.environ.get("KBCTL_HOME", "/tmp/kbctl-bench")
    qfile = EVALDATA / "scifact" / "queries.jsonl"
    queries = [json.loads(line)["text"] for line in qfile.read_text().splitlines() if line.strip()]
    kb = kbctl.open(home=home, profile="minilm", config=a.config)
    from kbctl.search import access

    original = access.viewable
    rows_out = []
    for share in ("ungated", 0, 50, 90):  # "ungated": unrestricted=True, the gate does not run at all
        extra = {"unrestricted": True} if share == "ungated" else {}

        # Withhold chunks by id, standing in for ACLs: the gate's one decision, which it applies to
        # the lanes before fusion (access.gate_lanes) and again to the page (access._first_k).
        def viewable(gate, keyed, acls, share=share):
            kept = [
                (key, s) for key, s in keyed if key in acls and key[1] % 100 >= (0 if share == "ungated" else share)
            ]
            return kept, len(keyed) - len(kept)

        access.viewable = viewable
        for mode in ("lexical", "dense", "hybrid"):
            kb.search(queries[0], ns, mode=mode, k=10, **extra)
            times, short = [], 0
            for q in queries[:300]:
                t0 = time.perf_counter()
                r = kb.search(q, ns, mode=mode, k=10, **extra)
                times.append((time.perf_counter() - t0) * 1000)
                short += len(r.hits) < 10
            rows_out.append((share, mode, statistics.median(times), percentile(times, 95), short))
            print(
                f"withheld {share}{'' if share == 'ungated' else '%'}  {mode:8s} p50 {rows_out[-1][2]:.1f} ms  p95 {rows_out[-1][3]:.1f} ms  short pages {short}",
                flush=True,
            )
    access.viewable = original
    kb.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
