"""halfvec against vector storage at 100k chunks (docs/benchmarks.md, "Profile lifecycle").

    python bench/lifecycle.py HOME SOURCE_NAMESPACE [--target 100000]

HOME holds SOURCE_NAMESPACE, filled with the ``hash-384`` profile (a SciFact import). The source is
scaled to ``--target`` chunks (``scale.make_scaled``: copies with perturbed vectors) into a namespace
of its own profile (``hash-384`` with another revision, so queries are embedded consistently),
then moved to ``halfvec`` with ``kb.reembed(..., storage="halfvec")`` (every vector from the embed
cache, cast; the index built after). Measured for both generations: bytes of the vectors and of
the HNSW index, the time to build the index (vector: rebuilt with REINDEX; halfvec: the re-embed,
copy and index), recall@10 of the HNSW path against an exact scan of the same generation (and of
halfvec's HNSW against vector's exact top 10), and the dense statement's execution time over the
SciFact test queries. Every figure comes with the load average.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EVALDATA

import kbctl
from kbctl.embed import get_embedder
from kbctl.search import parse_filters
from kbctl.search.lanes import dense_statement
from kbctl.store.generations import hnsw_index_name

NAME = "lc-100k"
QUERIES = EVALDATA / "scifact" / "queries.jsonl"


def _config(home: Path) -> Path:
    path = home.parent / f"{home.name}-lifecycle.toml"
    path.write_text(
        f'[profiles.{NAME}]\nembedder = "hash"\nmodel = "hash"\ndimension = 384\nrevision = "bench:{NAME}"\n\n'
        f'[namespaces.{NAME}]\nprofile = "{NAME}"\n'
    )
    return path


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _top(kb, ns, prof, qvec, exact: bool) -> tuple[list[int], float]:
    """Chunk ids of the top 10 and the statement's execution time (EXPLAIN ANALYZE), in ms."""
    import psycopg

    conn = kb.connection()
    st, params, settings = dense_statement([ns], qvec, 10, parse_filters([]), prof, exact=exact)
    with conn.transaction():
        for s in settings:
            conn.execute(s)
        ids = [r[1] for r in conn.execute(st, params)]
        plan = "\n".join(r[0] for r in conn.execute(psycopg.sql.SQL("EXPLAIN (ANALYZE) ") + st, params))
    return ids, float(re.search(r"Execution Time: ([\d.]+)", plan).group(1))


def _measure(kb, ns, prof, qvecs, truth=None) -> dict:
    recall, cross, ms = [], [], []
    exact_ids = []
    for q in qvecs:
        ids, t = _top(kb, ns, prof, q, exact=False)
        ex, _ = _top(kb, ns, prof, q, exact=True)
        exact_ids.append(ex)
        ms.append(t)
        recall.append(len(set(ids) & set(ex)) / max(len(ex), 1))
        if truth is not None:
            cross.append(len(set(ids) & set(truth[len(exact_ids) - 1])) / 10)
    ms.sort()
    out = {
        "recall@10_vs_exact": round(statistics.mean(recall), 4),
        "hnsw_ms_p50": round(ms[len(ms) // 2], 2),
        "hnsw_ms_p95": round(ms[int(len(ms) * 0.95)], 2),
        "load": _load(),
    }
    if cross:
        out["recall@10_vs_vector_exact"] = round(statistics.mean(cross), 4)
    return out, exact_ids


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(
        prog="bench/lifecycle.py",
        description="halfvec against vector storage (docs/benchmarks.md, 'Profile lifecycle').",
    )
    ap.add_argument("home", type=Path, help="the benchmark home holding SOURCE_NAMESPACE")
    ap.add_argument("source", metavar="SOURCE_NAMESPACE", help="a SciFact import under the hash-384 profile")
    ap.add_argument("--target", type=int, default=100_000, help="chunks to scale the source to (default 100000)")
    args = ap.parse_args(argv)
    home, source, target = args.home, args.source, args.target
    from scale import make_scaled

    kb = kbctl.open(home=home, config=_config(home), profile="hash-384")
    results: dict = {"target": target}
    t0 = time.perf_counter()
    kb.connection().execute("RESET ROLE")  # the bulk copy skips triggers: the login's (superuser's) to do
    results["scale"] = make_scaled(kb, source, NAME, target) | {"load": _load()}
    results["scale"]["seconds"] = round(time.perf_counter() - t0, 1)
    kb.close()  # the rest as the tenant's role
    ns = kb.namespace(NAME)
    prof = kb.profile_for(NAME)
    conn = kb.connection()
    conn.execute("VACUUM ANALYZE kbctl.vectors")
    t0 = time.perf_counter()
    admin = kb.db.connect()
    admin.execute(f"REINDEX INDEX kbctl.{hnsw_index_name(ns.generation_id)}")
    results["vector_index_build_s"] = {"seconds": round(time.perf_counter() - t0, 1), "load": _load()}
    emb = get_embedder(prof, purpose="query")
    qs = [json.loads(line)["text"] for line in QUERIES.read_text().splitlines()][:100]
    qvecs = [emb.embed_query(q) for q in qs]
    results["vector"], truth = _measure(kb, ns, prof, qvecs)
    t0 = time.perf_counter()
    report = kb.reembed(NAME, NAME, storage="halfvec", batch=2000)
    results["halfvec_build"] = report.to_json() | {"wall_s": round(time.perf_counter() - t0, 1), "load": _load()}
    kb.swap_generation(NAME)
    half = kb.namespace(NAME)
    results["halfvec"], _ = _measure(kb, half, prof, qvecs, truth)
    results["generations"] = kb.generations(NAME)
    print(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
