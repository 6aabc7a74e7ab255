"""Scale a namespace up with its own text: copies of its chunks with new ids and perturbed vectors.

``make_scaled(kb, "scifact", "scale-100k", 100_000)`` fills namespace ``scale-100k`` with exactly
100,000 chunks, copying SciFact's documents, chunks and postings inside PostgreSQL
(``INSERT … SELECT``), then rebuilding the namespace's vocabulary (df) and statistics, so both lanes
see a coherent collection. Copy 0 is SciFact unchanged; every later copy adds uniform noise of
±``NOISE`` per dimension to each vector and re-normalises it (cosine ≈ 0.97 to the original), and
gets its own content hash, so the embedding cache never hands a perturbed vector to a real ingest.

One chunk in twenty (counted over the whole namespace) carries ``metadata.bench_slice = "yes"``: a
5% filter for the filtered dense benchmark.

Each scaled namespace has its own profile (``SCALED``: the source's model with ``revision =
"bench:<name>"``), so its vectors live in their own partial HNSW index. Sharing the source's index
would put ten near-copies of every SciFact vector into the graph SciFact itself is searched with,
which is not a situation any real corpus creates and which measurably hurts HNSW recall for the
source namespace (top-10 agreement 0.995 → 0.918). Open the store with ``config=config_file(env)``
so these profiles resolve.

The copy runs on the store's own connection, as the tenant's role (row-level security holds it to
the tenant's rows, foreign keys are checked); what only the tables' owner may do goes through the
library's owner paths, as for any ingest: the namespace's HNSW index is dropped before the copy
(``drop_generation_indexes``) and built once after it (``ensure_index``), and the tables are
vacuumed and analyzed by ``kb.optimize()``. So it runs on a fresh home, where kbctl connects as
the owner and acts as the tenant.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

NOISE = 0.025
OFFSET = 100_000_000  # id offset per copy (ids of copy c: 10^12 + c·OFFSET + original id)
BASE = 1_000_000_000_000


SCALED = ("scale-10k", "scale-100k")


def sizes(env) -> dict[str, int]:
    """Each scaled namespace with its target chunk count (``env.scale``: 10k and 100k unless told)."""
    return dict(zip(SCALED, env.scale))


def config_file(env) -> Path:
    """A kbctl config declaring one profile per scaled namespace and binding the namespace to it."""
    from common import results_dir

    lines = []
    for name in SCALED:
        lines += [
            f"[profiles.{name}]",
            f'revision = "bench:{name}"',
            # a smoke pass: the backend the query path takes anyway, without measuring it for each profile
            *(['precision = "onnx-fp32"'] if getattr(env, "smoke", False) else []),
            "",
            f"[namespaces.{name}]",
            f'profile = "{name}"',
            "",
        ]
    path = results_dir(env) / "scale.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def make_scaled(kb, source: str, name: str, target: int) -> dict:
    """Create (or reuse, if it already has ``target`` chunks) a scaled copy of ``source``."""
    conn = kb.connection()
    src = kb.namespace(source)
    from kbctl.store import ensure_namespace
    from kbctl.store.namespaces import get_namespace

    prof = kb.profile_for(name)
    old = get_namespace(conn, name, kb.tenant, required=False)
    if old is not None and old.fingerprint != prof.fingerprint:  # made by an older version of this script
        _drop(kb, old, src)
    ns = ensure_namespace(conn, name, kb.tenant, prof, description=f"benchmark: {source} scaled to {target} chunks")
    from kbctl.store.generations import drop_generation_indexes, ensure_index, generations

    have = conn.execute("SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    if have == target:
        ensure_index(conn, next(g for g in generations(conn, ns.id) if g.id == ns.generation_id), prof)
        return {"namespace": name, "chunks": target, "seconds": 0.0, "reused": True}
    t0 = time.perf_counter()
    base = conn.execute("SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s", (src.id,)).fetchone()[0]
    copies = math.ceil(target / base)
    p = {
        "src": src.id,
        "dst": ns.id,
        "copies": copies,
        "base": base,
        "target": target,
        "off": OFFSET,
        "big": BASE,
        "noise": NOISE,
        "pid": ns.profile_id,
        "gid": ns.generation_id,
        "sgid": src.generation_id,
    }
    # the namespace's own generation: its index is built once after the copy, not row by row
    drop_generation_indexes(conn, [ns.generation_id])
    with conn.transaction():
        conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
        for table in (
            "vectors",
            "lexical_segments",
            "lexical_postings",
            "lexical_vocab",
            "lexical_stats",
            "chunks",
            "documents",
        ):
            conn.execute(f"DELETE FROM kbctl.{table} WHERE namespace_id = %s", (ns.id,))
        conn.execute(
            "CREATE TEMP TABLE bench_src ON COMMIT DROP AS"
            " SELECT id, row_number() OVER (ORDER BY id) - 1 AS rn FROM kbctl.chunks WHERE namespace_id = %(src)s",
            p,
        )
        conn.execute(
            "CREATE TEMP TABLE bench_copy ON COMMIT DROP AS"
            " SELECT s.id, c, %(big)s + c * %(off)s + s.id AS new_id, c * %(base)s + s.rn AS n"
            " FROM bench_src s CROSS JOIN generate_series(0::bigint, %(copies)s - 1) c"
            " WHERE c * %(base)s + s.rn < %(target)s",
            p,
        )
        conn.execute("CREATE INDEX ON bench_copy (id)")
        conn.execute(
            "INSERT INTO kbctl.documents (namespace_id, id, uri, source_uri, source_hash, title, source_type,"
            " content_hash, metadata, char_count, chunk_count)"
            " SELECT %(dst)s, %(big)s + c * %(off)s + d.id, d.uri || '#' || c, d.source_uri || '#' || c, d.source_hash,"
            " d.title, d.source_type, d.content_hash, d.metadata, d.char_count, d.chunk_count"
            " FROM kbctl.documents d CROSS JOIN generate_series(0::bigint, %(copies)s - 1) c WHERE d.namespace_id = %(src)s",
            p,
        )
        conn.execute(
            "INSERT INTO kbctl.chunks (namespace_id, id, document_id, position, text, token_count, char_start, char_end,"
            " heading_path, page, content_hash, metadata, lex_length)"
            " SELECT %(dst)s, b.new_id, %(big)s + b.c * %(off)s + s.document_id, s.position, s.text, s.token_count,"
            " s.char_start, s.char_end, s.heading_path, s.page, s.content_hash || ':bench' || b.c,"
            " s.metadata || jsonb_build_object('uri', (s.metadata->>'uri') || '#' || b.c)"
            "   || CASE WHEN b.n %% 20 = 0 THEN '{\"bench_slice\": \"yes\"}'::jsonb ELSE '{}'::jsonb END,"
            " s.lex_length"
            " FROM bench_copy b JOIN kbctl.chunks s ON s.namespace_id = %(src)s AND s.id = b.id",
            p,
        )
        conn.execute(
            "INSERT INTO kbctl.vectors (namespace_id, chunk_id, generation_id, document_id, profile_id, dimension,"
            " storage, embedding)"
            " SELECT %(dst)s, b.new_id, %(gid)s, %(big)s + b.c * %(off)s + v.document_id, %(pid)s, v.dimension, 'vector',"
            " CASE WHEN b.c = 0 THEN v.embedding ELSE l2_normalize((SELECT array_agg(x + (random() - 0.5) * 2 * %(noise)s"
            "   ORDER BY i) FROM unnest(v.embedding::real[]) WITH ORDINALITY u(x, i))::vector) END"
            " FROM bench_copy b JOIN kbctl.vectors v"
            "   ON v.namespace_id = %(src)s AND v.chunk_id = b.id AND v.generation_id = %(sgid)s",
            p,
        )
        conn.execute(
            "INSERT INTO kbctl.lexical_postings (namespace_id, term, chunk_id, tf, dl)"
            " SELECT %(dst)s, l.term, b.new_id, l.tf, l.dl"
            " FROM kbctl.lexical_postings l JOIN bench_copy b ON b.id = l.chunk_id WHERE l.namespace_id = %(src)s",
            p,
        )
        conn.execute(
            "INSERT INTO kbctl.lexical_vocab (namespace_id, term, df)"
            " SELECT %(dst)s, term, count(*) FROM kbctl.lexical_postings WHERE namespace_id = %(dst)s GROUP BY term",
            p,
        )
        conn.execute(
            "INSERT INTO kbctl.lexical_stats (namespace_id, chunk_count, total_length)"
            " SELECT %(dst)s, count(*), coalesce(sum(lex_length), 0) FROM kbctl.chunks WHERE namespace_id = %(dst)s",
            p,
        )
    gen = next(g for g in generations(conn, ns.id) if g.id == ns.generation_id)
    ensure_index(conn, gen, prof)
    kb.optimize()  # VACUUM (ANALYZE) as the tables' owner: fresh statistics for the planner
    return {"namespace": name, "chunks": target, "copies": copies, "seconds": time.perf_counter() - t0, "reused": False}


def _drop(kb, old, src) -> None:
    """Remove a scaled namespace made by an older version of this script (its generations' indexes
    go with it: ``delete_namespace``)."""
    from kbctl.store.namespaces import delete_namespace

    delete_namespace(kb.connection(), old.name, old.tenant)
