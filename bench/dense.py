"""Dense lane: HNSW against an exact scan, unfiltered and with a filter that keeps 5% of rows.

Both paths are kbctl's own ``dense_lane``: ``exact_threshold=0`` forces HNSW (pgvector index,
``hnsw.iterative_scan = relaxed_order`` so a filtered query still fills k), a huge
``exact_threshold`` forces the exact path (ordering by the bare ``embedding`` column, which no
index can serve). Agreement is the mean overlap of the two top-10 sets over the SciFact queries.
"""

from __future__ import annotations

import numpy as np
from common import Env, ensure_imported, md_table, save_json, verdict

K = 10
EXACT = 10**12
SLICE = ("bench_slice=yes",)


def _agreement(kb, namespace: str, qvecs, filters=(), ef_search: int | None = None) -> dict:
    from kbctl.search import parse_filters
    from kbctl.search.lanes import dense_lane

    conn = kb.connection()
    ns = kb.namespace(namespace)
    prof = kb.profile_for(namespace)
    flt = parse_filters(list(filters))
    overlaps, short_h, short_e, paths = [], 0, 0, set()
    for v in qvecs:
        hnsw, p1 = dense_lane(conn, [ns], v, K, flt, prof, exact_threshold=0, ef_search=ef_search)
        exact, p2 = dense_lane(conn, [ns], v, K, flt, prof, exact_threshold=EXACT)
        paths.add((p1, p2))
        short_h += len(hnsw) < K
        short_e += len(exact) < K
        overlaps.append(len({h.chunk_id for h in hnsw} & {h.chunk_id for h in exact}) / max(1, len(exact)))
    rows = conn.execute("SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    kept = rows
    if filters:
        from psycopg import sql

        from kbctl.store.filters import filter_sql as filters_sql

        fsql, fp = filters_sql(flt)
        kept = conn.execute(
            sql.SQL("SELECT count(*) FROM kbctl.chunks c WHERE c.namespace_id = %s AND {}").format(fsql), [ns.id, *fp]
        ).fetchone()[0]
    return {
        "namespace": namespace,
        "filter": " ".join(filters) or "none",
        "ef_search": ef_search or prof.hnsw.ef_search,
        "rows": rows,
        "rows kept": kept,
        "queries": len(qvecs),
        "top-10 agreement": float(np.mean(overlaps)),
        "min agreement": float(np.min(overlaps)),
        "queries < 10 (HNSW)": short_h,
        "queries < 10 (exact)": short_e,
        "paths": ", ".join(sorted({f"{a}/{b}" for a, b in paths})),
    }


def run(env: Env) -> str:
    """HNSW vs exact agreement on the SciFact test queries, unfiltered and 5%-filtered."""
    from scale import make_scaled, sizes

    import kbctl
    from kbctl.embed import get_embedder
    from kbctl.evals import load_dataset

    ensure_imported(env, "scifact")
    ds = load_dataset(env.collection("scifact"))
    from scale import config_file

    scaled = sizes(env)
    largest = list(scaled)[-1]

    kb = kbctl.open(home=env.home, config=config_file(env))
    try:
        emb = get_embedder(kb.profile_for("scifact"))
        qvecs = [emb.embed_query(q.text) for q in env.few(ds.queries)]
        rows = []
        for name in ("scifact", *scaled):
            if name in scaled:
                make_scaled(kb, "scifact", name, scaled[name])
            rows.append(_agreement(kb, name, qvecs))
            if name in scaled:
                rows.append(_agreement(kb, name, qvecs, SLICE))
            if name == largest:  # its clusters of near-copies are hard for HNSW: what ef_search recovers
                rows += [_agreement(kb, name, qvecs, ef_search=ef) for ef in (200, 400)]
    finally:
        kb.close()
    save_json(env, "dense", rows)
    cols = [
        "namespace",
        "filter",
        "ef_search",
        "rows",
        "rows kept",
        "queries",
        "top-10 agreement",
        "min agreement",
        "queries < 10 (HNSW)",
        "queries < 10 (exact)",
        "paths",
    ]
    sci = next(r for r in rows if r["namespace"] == "scifact")
    ok = sci["top-10 agreement"] >= 0.98 and all(
        r["queries < 10 (HNSW)"] == 0 and r["queries < 10 (exact)"] == 0 for r in rows
    )
    body = md_table(rows, cols, digits=4)
    body += (
        f"\nHNSW m 16, ef_construction 64 (kbctl defaults). Targets: on SciFact, HNSW top-10 agreement with the"
        f" exact scan ≥ 0.98 ({sci['top-10 agreement']:.4f}), and every 5%-filtered query returns 10 on both paths"
        f" → {verdict(env, ok)}.\n"
    )
    print(body)
    return body
