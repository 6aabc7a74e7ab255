"""Ingest throughput: SciFact end to end against embedding alone, then an unchanged re-import.

1. A fresh home (its own embedded server, so the embedding cache is empty): ``kbctl db migrate``
   starts the server first, so the timed import does not include initdb.
2. ``kbctl eval import scifact -n scifact --json``, timed as a process (Python start, model load,
   fetch → extract → chunk → embed → store → verify); the run's own ``seconds`` are reported too.
3. Embedding only: the same chunk texts (what the model read: header + text, read back from the
   store) through ``get_embedder(profile).embed_documents`` in the groups the pipeline hands it
   (``GROUP_BATCHES × profile.batch_size`` texts, which the model sorts by length and cuts into
   batches), after the model is loaded.
4. The same import again, unchanged: every source is skipped before extraction.
"""

from __future__ import annotations

import json
import shutil
import time

from common import Env, kbctl, md_table, save_json

NAMESPACE = "scifact"


def _embed_only(home, namespace: str) -> dict:
    import kbctl as kb_mod
    from kbctl.embed import get_embedder

    kb = kb_mod.open(home=home)
    try:
        prof = kb.profile_for(namespace)
        ns = kb.namespace(namespace)
        rows = (
            kb.connection()
            .execute(
                "SELECT d.title, c.heading_path, c.text FROM kbctl.chunks c JOIN kbctl.documents d"
                " ON d.namespace_id = c.namespace_id AND d.id = c.document_id WHERE c.namespace_id = %s ORDER BY c.id",
                (ns.id,),
            )
            .fetchall()
        )
    finally:
        kb.close()
    from kbctl.chunk import _header  # the header the chunker gave the model

    texts = [f"{h}\n\n{t}" if (h := _header(title, tuple(hp))) else t for title, hp, t in rows]
    emb = get_embedder(prof)
    emb.embed_documents(texts[:8])  # load the model and warm up
    from kbctl.embed import GROUP_BATCHES

    bs = int(prof.batch_size) * GROUP_BATCHES
    t0 = time.perf_counter()
    for i in range(0, len(texts), bs):
        emb.embed_documents(texts[i : i + bs])
    secs = time.perf_counter() - t0
    return {"chunks": len(texts), "seconds": secs, "chunks_per_s": len(texts) / secs}


def run(env: Env) -> str:
    """The ingest table for docs/benchmarks.md."""
    home = env.home.parent / (env.home.name + "-ingest")
    if home.exists():
        kbctl(env, "db", "stop", home=home, check=False)
        shutil.rmtree(home)
    kbctl(env, "db", "migrate", home=home)
    try:
        path = str(env.collection("scifact"))
        t0 = time.perf_counter()
        first = json.loads(kbctl(env, "eval", "import", path, "-n", NAMESPACE, "--json", home=home).stdout)
        wall1 = time.perf_counter() - t0
        emb = _embed_only(home, NAMESPACE)
        t0 = time.perf_counter()
        second = json.loads(kbctl(env, "eval", "import", path, "-n", NAMESPACE, "--json", home=home).stdout)
        wall2 = time.perf_counter() - t0
    finally:
        kbctl(env, "db", "stop", home=home, check=False)
    chunks = first["chunks"]["embedded"] + first["chunks"]["reused"]
    e2e_wall, e2e_run = chunks / wall1, chunks / first["seconds"]
    rows = [
        {
            "what": "first import, whole process (wall)",
            "documents": first["documents"]["new"],
            "chunks": chunks,
            "seconds": wall1,
            "chunks/s": e2e_wall,
            "vs embedding only": e2e_wall / emb["chunks_per_s"],
        },
        {
            "what": "first import, ingest run (report.seconds)",
            "documents": first["documents"]["new"],
            "chunks": chunks,
            "seconds": float(first["seconds"]),
            "chunks/s": e2e_run,
            "vs embedding only": e2e_run / emb["chunks_per_s"],
        },
        {
            "what": "embedding only, same chunk texts",
            "documents": None,
            "chunks": emb["chunks"],
            "seconds": emb["seconds"],
            "chunks/s": emb["chunks_per_s"],
            "vs embedding only": 1.0,
        },
        {
            "what": "re-import unchanged, whole process (wall)",
            "documents": second["documents"]["unchanged"],
            "chunks": second["chunks"]["embedded"],
            "seconds": wall2,
            "chunks/s": None,
            "vs embedding only": None,
        },
        {
            "what": "re-import unchanged, ingest run (report.seconds)",
            "documents": second["documents"]["unchanged"],
            "chunks": second["chunks"]["embedded"],
            "seconds": float(second["seconds"]),
            "chunks/s": None,
            "vs embedding only": None,
        },
    ]
    save_json(env, "ingest", {"first": first, "second": second, "wall1": wall1, "wall2": wall2, "embed_only": emb})
    body = md_table(rows, ["what", "documents", "chunks", "seconds", "chunks/s", "vs embedding only"], digits=2)
    ratio_ok = e2e_wall / emb["chunks_per_s"] >= 0.8
    reimport = wall2 / wall1
    body += (
        f"\nEnd-to-end / embedding-only: {e2e_wall / emb['chunks_per_s']:.2f} (wall) and {e2e_run / emb['chunks_per_s']:.2f}"
        f" (run) — target ≥ 0.8 → {'**met**' if ratio_ok else '**missed**'}. Unchanged re-import: {wall2:.1f} s wall ="
        f" {100 * reimport:.1f}% of the first import ({100 * float(second['seconds']) / float(first['seconds']):.1f}% by"
        f" run seconds) — target < 5% → {'**met**' if reimport < 0.05 else '**missed**'}.\n"
    )
    print(body)
    return body
