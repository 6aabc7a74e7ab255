"""The lexical lane, packed against every posting (bench part `lexical`).

For each namespace measured (SciFact's scaled namespaces of the `latency` part, and the synthetic
million of the `million` part when it is there), every query runs the lexical lane twice, in turn:
as kbctl runs it (a packed namespace: its segments' term arrays added up with numpy, MaxScore
skipping what cannot reach the top k, ``kbctl/search/termarrays.py``) and with the packed
postings ignored (every posting of the query's terms scored in SQL, the lane before migration
014). Both see the same load, query by query. Reported: each one's p50/p95, the postings the
packed lane scored against the postings of the query's terms, and whether the two
returned the same top k (chunk ids and scores): exactness on real queries, beside the property
test's generated ones (``tests/db/test_blockmax.py``).

The lane is called as the search calls it (``lexical_lane``, depth = the profile's ``candidates``,
100), without the query embedding, fusion or rendering: the figures are the lane's own.
"""

from __future__ import annotations

import os
import time

import numpy as np
from common import Env, ensure_imported, md_table, save_json

from kbctl.evals.metrics import percentile

DEPTH = 100


def _lane(kb, name: str, queries: list[str]) -> dict:
    from kbctl.search import lanes
    from kbctl.store import lexical as packed
    from kbctl.store import search as store
    from kbctl.textutil.analyze import get_analyzer

    conn = kb.connection()
    ns = kb.namespace(name)
    prof = kb.profile_for(name)
    an = get_analyzer(prof.lexical.language)
    segs = packed.segments(conn, [ns.id])
    real_plan = packed.plan
    fast, slow, read, total, same = [], [], [], [], 0
    for q in queries:
        terms: dict[str, float] = {}
        for t in an.terms(q):
            terms[t] = terms.get(t, 0.0) + 1.0
        if not terms:
            continue
        info: dict = {}
        t0 = time.perf_counter()
        a = lanes.lexical_lane(conn, [ns], terms, DEPTH, (), prof, info=info)
        t1 = time.perf_counter()
        lanes.packed.plan = lambda *a, **kw: ({}, [])  # type: ignore[assignment]
        try:
            t2 = time.perf_counter()
            b = lanes.lexical_lane(conn, [ns], terms, DEPTH, (), prof)
            t3 = time.perf_counter()
        finally:
            lanes.packed.plan = real_plan  # type: ignore[assignment]
        fast.append((t1 - t0) * 1000)
        slow.append((t3 - t2) * 1000)
        df = store.vocabulary_df(conn, [ns.id], list(terms))
        total.append(sum(df.values()))
        read.append(info.get("packed", {}).get("scored", 0))
        same += [(h.chunk_id, round(h.score, 6)) for h in a] == [(h.chunk_id, round(h.score, 6)) for h in b]
    return {
        "namespace": name,
        "chunks": f"{store.lexical_stats(conn, [ns.id])[0]:,.0f}",
        "segments": len(segs),
        "queries": len(fast),
        "packed p50 ms": percentile(fast, 50),
        "packed p95 ms": percentile(fast, 95),
        "every posting p50 ms": percentile(slow, 50),
        "every posting p95 ms": percentile(slow, 95),
        "postings of the terms (median)": float(np.median(total)),
        "scored (median)": float(np.median(read)),
        "same top 100": f"{same}/{len(fast)}",
    }


def run(env: Env) -> str:
    from scale import config_file, sizes

    import kbctl
    from kbctl.evals import load_dataset

    rows = []
    load = [os.getloadavg()]
    ensure_imported(env, "scifact")
    queries = env.few([q.text for q in load_dataset(env.collection("scifact")).queries])
    kb = kbctl.open(home=env.home, config=config_file(env))
    try:
        from latency import prepare

        prepare(kb, env)
        for name in ("scifact", *sizes(env)):
            rows.append(_lane(kb, name, queries))
            print(rows[-1], flush=True)
    finally:
        kb.close()
    million = _million(env)
    if million is not None:
        rows.append(million)
        print(rows[-1], flush=True)
    load.append(os.getloadavg())
    save_json(env, "lexical", {"rows": rows, "load": load})
    cols = list(rows[0])
    body = md_table(rows, cols, digits=1)
    body += (
        f"\nLexical lane alone, depth {DEPTH}, queries in turn packed / every posting; load average before"
        f" {', '.join(f'{x:.2f}' for x in load[0])}, after {', '.join(f'{x:.2f}' for x in load[1])}.\n"
    )
    print(body)
    return body


def _million(env: Env) -> dict | None:
    """The synthetic namespace of part `million`, if its home holds it (``KBCTL_BENCH_MILLION_HOME``)."""
    home = os.environ.get("KBCTL_BENCH_MILLION_HOME")
    if not home or env.smoke:
        return None
    import million

    kb, name, _, qs = million.opened_with_queries(env, home)
    try:
        return _lane(kb, name, qs)
    finally:
        kb.close()
