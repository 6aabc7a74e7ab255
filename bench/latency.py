"""Search latency per mode at 10k and 100k chunks, in-process, plus one cold CLI call.

In-process: ``kbctl.open(home=…)`` then ``kb.search(q, ns, mode=…, k=10)`` for every SciFact test
query (default options: typo correction on, no reranking), after one warm-up query per mode so the
model is loaded and the connection open, after ``kbctl db optimize --reindex`` (the scaled
namespaces are bulk-copied; their B-tree pages are left half full, as after any large ingest), and
after the files of kbctl's tables and indexes have been
read once, so they are in the OS page cache as on a server that has been up for a while (a
freshly restarted machine otherwise measures its disk: 3.5 GB of benchmark store, mostly cold). Each figure is the wall time of the ``kb.search`` call:
query embedding, both lanes in PostgreSQL, fusion, shaping and citations.

Cold CLI: the wall time of one ``kbctl search`` process (Python start, imports, model load,
connection to the already-running embedded server, the query, rendering).
"""

from __future__ import annotations

import statistics
import subprocess
import time

from common import KBCTL, Env, md_table, save_json
from scale import config_file, make_scaled

from kbctl.evals.metrics import percentile

# "hybrid+prf": hybrid search with pseudo-relevance feedback (prf = "hybrid"): a second round of
# both lanes after the first, so its cost is the feedback step's.
MODES = ("lexical", "dense", "hybrid", "hybrid+prf")
SIZES = {"scale-10k": 10_000, "scale-100k": 100_000}
TARGET_P95_MS = 100.0


def _measure(kb, namespace: str, queries: list[str], label: str) -> list[float]:
    mode, opts = ("hybrid", {"prf": "hybrid"}) if label == "hybrid+prf" else (label, {"prf": "off"})
    kb.search(queries[0], namespace, mode=mode, k=10, **opts)  # warm-up
    out = []
    for q in queries:
        t0 = time.perf_counter()
        kb.search(q, namespace, mode=mode, k=10, **opts)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def warm_page_cache(kb) -> dict:
    """Read every file of the kbctl schema's tables, indexes and TOAST (the embedded store is local)."""
    from pathlib import Path

    conn = kb.connection()
    data = Path(conn.execute("SHOW data_directory").fetchone()[0])
    rels = [
        r[0]
        for r in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relkind IN ('r', 'i', 't')"
            " AND (c.relnamespace = 'kbctl'::regnamespace OR c.oid IN (SELECT reltoastrelid FROM pg_class"
            "      WHERE relnamespace = 'kbctl'::regnamespace) OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN"
            "      (SELECT reltoastrelid FROM pg_class WHERE relnamespace = 'kbctl'::regnamespace)))"
        )
    ]
    t0, size = time.perf_counter(), 0
    for rel in filter(None, rels):
        for f in sorted(data.glob(rel + "*")):  # segments (.1, .2, …) and the free-space/visibility maps
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    size += len(chunk)
    return {"warmed_mb": round(size / 2**20), "seconds": round(time.perf_counter() - t0, 1)}


def cold_cli(env: Env, namespace: str, query: str, repeats: int = 3) -> list[float]:
    """Wall seconds of ``kbctl search`` processes (each one a cold Python + model load)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(
            [
                KBCTL,
                "--home",
                str(env.home),
                "--config",
                str(config_file(env)),
                "search",
                query,
                "-n",
                namespace,
                "-k",
                "10",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - t0)
    return times


def run(env: Env) -> str:
    """The latency table (and the cold CLI line) for docs/benchmarks.md."""
    import kbctl
    from kbctl.evals import load_dataset

    queries = [q.text for q in load_dataset(env.collection("scifact")).queries]
    from scale import config_file

    kb = kbctl.open(home=env.home, config=config_file(env))
    rows, raw = [], {}
    try:
        infos = [make_scaled(kb, "scifact", name, size) for name, size in SIZES.items()]
        from kbctl.store.admin import optimize

        t0 = time.perf_counter()
        optimize(kb.connection(), reindex=True)
        print(infos, f"optimize --reindex: {time.perf_counter() - t0:.1f} s", flush=True)
        for name, size in SIZES.items():
            print(name, warm_page_cache(kb), flush=True)
            for mode in MODES:
                lat = _measure(kb, name, queries, mode)
                raw[f"{name}/{mode}"] = lat
                rows.append(
                    {
                        "chunks": f"{size:,}",
                        "mode": mode,
                        "queries": len(lat),
                        "p50 ms": percentile(lat, 50),
                        "p95 ms": percentile(lat, 95),
                        "mean ms": statistics.fmean(lat),
                    }
                )
                print(rows[-1], flush=True)
    finally:
        kb.close()
    cold = cold_cli(env, "scale-100k", queries[0])
    save_json(env, "latency", {"rows": rows, "raw": raw, "cold_cli_s": cold})
    hybrid100 = next(r for r in rows if r["chunks"] == "100,000" and r["mode"] == "hybrid")
    body = md_table(rows, ["chunks", "mode", "queries", "p50 ms", "p95 ms", "mean ms"], digits=1)
    body += (
        f"\nHybrid p95 at 100k chunks: {hybrid100['p95 ms']:.1f} ms (target < {TARGET_P95_MS:.0f} ms →"
        f" {'**met**' if hybrid100['p95 ms'] < TARGET_P95_MS else '**missed**'}).\n\n"
        f"Cold `kbctl search` CLI call (100k namespace, hybrid, server already running): "
        f"{', '.join(f'{t:.2f}' for t in cold)} s (median {statistics.median(cold):.2f} s).\n"
    )
    print(body)
    return body
