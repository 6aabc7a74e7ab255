"""Lexical parity: kbctl's BM25 lane against the ``bm25s`` package on the same tokens.

Both sides get exactly kbctl's analysis (``get_analyzer("english").terms``): bm25s is handed
pre-tokenised lists, with k1 = 0.9, b = 0.4 and ``method="lucene"``, whose idf is kbctl's
``ln(1 + (N - df + 0.5) / (df + 0.5))`` and whose term weight ``tf / (tf + k1·(1 - b + b·dl/avgdl))``
differs from kbctl's only by the constant factor (k1 + 1), so rankings are identical.

kbctl indexes chunks and a document scores as its best chunk, so bm25s runs twice:

- ``whole documents``: one bm25s document per corpus record, ``terms(title + " " + text)``;
- ``kbctl's chunks``: one bm25s document per stored chunk, built from kbctl's own postings
  (``kbctl.lexical_postings``), a document scored by its best chunk.

All runs are scored by pytrec_eval (nDCG@10, test qrels of SciFact).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from common import Env, ensure_imported, md_table, save_json, verdict

K1, B = 0.9, 0.4
DEPTH = 100


def _ndcg(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> float:
    import pytrec_eval

    scored = {q: {d: float(-i) for i, d in enumerate(docs)} for q, docs in run.items()}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    res = ev.evaluate(scored)
    return sum(res.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels) / len(qrels)


def _bm25s_run(docs_tokens: list[list[str]], owner: list[str], queries: dict[str, list[str]]) -> dict[str, list[str]]:
    """Rank documents for each query; a document is the best of its rows in ``docs_tokens``."""
    import bm25s

    model = bm25s.BM25(k1=K1, b=B, method="lucene")
    model.index(docs_tokens, show_progress=False)
    owner_arr = np.asarray(owner, dtype=object)
    run = {}
    for qid, toks in queries.items():
        toks = [t for t in toks if t in model.vocab_dict]
        if not toks:
            run[qid] = []
            continue
        scores = model.get_scores(toks)
        order = np.argsort(-scores, kind="stable")
        out, seen = [], set()
        for i in order:
            if scores[i] <= 0:
                break
            d = owner_arr[i]
            if d not in seen:
                seen.add(d)
                out.append(d)
                if len(out) >= DEPTH:
                    break
        run[qid] = out
    return run


def _chunk_tokens(kb, namespace: str) -> tuple[list[list[str]], list[str]]:
    """kbctl's stored postings as token lists, one per chunk, with the owning document's id."""
    conn = kb.connection()
    ns = kb.namespace(namespace)
    rows = conn.execute(
        "SELECT p.chunk_id, p.term, p.tf, d.uri FROM kbctl.lexical_postings p"
        " JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id"
        " JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id"
        " WHERE p.namespace_id = %s ORDER BY p.chunk_id",
        (ns.id,),
    ).fetchall()
    toks: dict[int, list[str]] = defaultdict(list)
    owner: dict[int, str] = {}
    for cid, term, tf, uri in rows:
        toks[cid].extend([term] * round(tf))
        owner[cid] = uri
    ids = sorted(toks)
    return [toks[i] for i in ids], [owner[i] for i in ids]


def _kbctl_runs(env: Env, namespace: str, ds, queries: dict) -> tuple[dict, dict, int, int, str]:
    """kbctl's lexical lane (document level) and bm25s over kbctl's own chunks, on each query;
    and how many chunks and documents the namespace holds."""
    import kbctl
    from kbctl.api.evals import search_fn

    kb = kbctl.open(home=env.home)
    try:
        ctoks, owner = _chunk_tokens(kb, namespace)
        chunks = _bm25s_run(ctoks, owner, queries)
        fn = search_fn(kb, ds, namespace, DEPTH)
        ours = {q.id: [d for d, _ in fn(q, "lexical")] for q in ds.queries}
        return ours, chunks, len(ctoks), len(set(owner)), _packed(kb, namespace)
    finally:
        kb.close()


def _packed(kb, namespace: str) -> str:
    """Which lexical lane answered: the packed postings' segments (term arrays) or every posting."""
    from kbctl.store import lexical

    segs = lexical.segments(kb.connection(), [kb.namespace(namespace).id])
    if not segs:
        return "not packed: every posting scored in SQL"
    return f"packed: {len(segs)} segment(s), {sum(s.chunks for s in segs):,} chunks, term arrays top k"


def run(env: Env, namespace: str = "scifact") -> str:
    """The parity table for SciFact (the namespace must hold the imported collection)."""
    from kbctl.evals import iter_beir_corpus, load_dataset
    from kbctl.textutil.analyze import get_analyzer

    ensure_imported(env, namespace)
    path = env.collection("scifact")
    ds = load_dataset(path)
    qrels = {q: dict(r) for q, r in ds.qrels.items()}
    an = get_analyzer("english")
    queries = {q.id: an.terms(q.text) for q in ds.queries}

    corpus = list(iter_beir_corpus(path))
    whole = _bm25s_run(
        [an.terms((d.get("title") or "") + " " + (d.get("text") or "")) for d in corpus],
        [d["_id"] for d in corpus],
        queries,
    )

    ours, chunks, nchunks, ndocs, lane = _kbctl_runs(env, namespace, ds, queries)

    n_k, n_w, n_c = _ndcg(ours, qrels), _ndcg(whole, qrels), _ndcg(chunks, qrels)
    top10 = [len(set(ours[q][:10]) & set(chunks[q][:10])) / max(1, min(10, len(chunks[q]))) for q in ours if chunks[q]]
    rows = [
        {
            "run": "kbctl lexical lane (chunks, best chunk per document)",
            "units": nchunks,
            "nDCG@10": n_k,
            "Δ vs kbctl": 0.0,
        },
        {
            "run": "bm25s on kbctl's chunks (best chunk per document)",
            "units": nchunks,
            "nDCG@10": n_c,
            "Δ vs kbctl": n_c - n_k,
        },
        {
            "run": "bm25s on whole documents (title + text)",
            "units": len(corpus),
            "nDCG@10": n_w,
            "Δ vs kbctl": n_w - n_k,
        },
    ]
    save_json(env, "parity", {"kbctl": n_k, "bm25s_chunks": n_c, "bm25s_docs": n_w, "top10_overlap": top10})
    body = md_table(rows, ["run", "units", "nDCG@10", "Δ vs kbctl"], digits=4)
    body += (
        f'\nSciFact test ({len(qrels)} queries), k1 {K1}, b {B}, bm25s method "lucene" (idf ln(1 + (N − df + 0.5)/(df + 0.5)),'
        f" as kbctl); {ndocs} documents in {nchunks} chunks. Mean top-10 overlap of kbctl and bm25s-on-chunks:"
        f" {np.mean(top10):.4f}. Parity target: |Δ| ≤ 0.01 → "
        f"{verdict(env, abs(n_c - n_k) <= 0.01 and abs(n_w - n_k) <= 0.01, 'met', 'see notes')}"
        f" (chunks {abs(n_c - n_k):.4f}, whole documents {abs(n_w - n_k):.4f}). kbctl's lexical lane: {lane}.\n"
    )
    print(body)
    return body
