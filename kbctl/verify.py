"""The verify stage: check that a namespace's store is whole and consistent.

Checks: document/chunk counts agree, no orphans (chunks, postings, child documents), every chunk
has a vector of the pinned profile and dimension, the profile's HNSW index exists, the lexical
statistics match the chunks, and a sample of chunks finds itself in the top 3 of a dense search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from .config import Profile
from .store.namespaces import Namespace, hnsw_index_name

__all__ = ["Check", "VerifyReport", "verify_namespace"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class VerifyReport:
    namespace: str
    checks: tuple[Check, ...]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "ok": self.ok,
            "counts": self.counts,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }


def verify_namespace(conn, ns: Namespace, profile: Profile | None = None, sample: int = 20) -> VerifyReport:
    """Run every check on ``ns``; ``profile`` (when given) must match the namespace's pin."""
    one = lambda q, *p: conn.execute(q, p).fetchone()[0]  # noqa: E731
    docs = one("SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s", ns.id)
    chunks = one("SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s", ns.id)
    declared = one("SELECT coalesce(sum(chunk_count), 0) FROM kbctl.documents WHERE namespace_id = %s", ns.id)
    checks = [
        Check("counts", declared == chunks, f"{docs} documents, {chunks} chunks (documents declare {declared})"),
        _orphans(conn, ns),
        _vectors(conn, ns),
        _pin(ns, profile),
        _index(conn, ns),
        _lexical(conn, ns, chunks),
        _self_retrieval(conn, ns, sample),
    ]
    return VerifyReport(ns.name, tuple(checks), {"documents": int(docs), "chunks": int(chunks)})


def _orphans(conn, ns: Namespace) -> Check:
    postings = conn.execute(
        "SELECT count(*) FROM kbctl.lexical_postings p WHERE p.namespace_id = %s AND NOT EXISTS"
        " (SELECT 1 FROM kbctl.chunks c WHERE c.namespace_id = p.namespace_id AND c.id = p.chunk_id)",
        (ns.id,),
    ).fetchone()[0]
    children = conn.execute(
        "SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = %s AND d.parent_uri IS NOT NULL AND NOT EXISTS"
        " (SELECT 1 FROM kbctl.documents p WHERE p.namespace_id = d.namespace_id AND p.uri = d.parent_uri)",
        (ns.id,),
    ).fetchone()[0]
    empty = conn.execute(
        "SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = %s AND NOT EXISTS"
        " (SELECT 1 FROM kbctl.chunks c WHERE c.namespace_id = d.namespace_id AND c.document_id = d.id)",
        (ns.id,),
    ).fetchone()[0]
    ok = postings == 0 and children == 0 and empty == 0
    return Check("orphans", ok, f"{postings} postings without chunk, {children} attachments without parent, {empty} documents without chunks")


def _vectors(conn, ns: Namespace) -> Check:
    bad = conn.execute(
        "SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s AND (embedding IS NULL OR profile_id <> %s"
        " OR vector_dims(embedding) <> %s)",
        (ns.id, ns.profile_id, ns.dimension),
    ).fetchone()[0]
    return Check("embeddings", bad == 0, f"{bad} chunks without a {ns.dimension}-d vector of profile {ns.profile_name}")


def _pin(ns: Namespace, profile: Profile | None) -> Check:
    if profile is None:
        return Check("profile", True, f"pinned to {ns.profile_name} ({ns.fingerprint})")
    ok = profile.fingerprint == ns.fingerprint and profile.dimension == ns.dimension
    return Check("profile", ok, f"namespace {ns.fingerprint} ({ns.dimension}-d), configured {profile.fingerprint} ({profile.dimension}-d)")


def _index(conn, ns: Namespace) -> Check:
    names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'kbctl'")}
    need = {hnsw_index_name(ns.profile_id), "lexical_postings_pkey", "chunks_metadata", "chunks_profile_hash"}
    missing = sorted(need - names)
    return Check("indexes", not missing, "missing: " + ", ".join(missing) if missing else "HNSW, lexical and metadata indexes present")


def _lexical(conn, ns: Namespace, chunks: int) -> Check:
    row = conn.execute("SELECT chunk_count, total_length FROM kbctl.lexical_stats WHERE namespace_id = %s", (ns.id,)).fetchone()
    n = int(row[0]) if row else 0
    total = conn.execute("SELECT coalesce(sum(lex_length), 0) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    ok = n == chunks and abs(float(row[1] if row else 0) - float(total)) < 1e-3 * max(1.0, float(total))
    return Check("lexical", ok, f"statistics count {n} chunks, store has {chunks}")


def _self_retrieval(conn, ns: Namespace, sample: int) -> Check:
    rows = conn.execute(
        "SELECT id, content_hash, embedding FROM kbctl.chunks WHERE namespace_id = %s ORDER BY md5(id::text) LIMIT %s",
        (ns.id, sample),
    ).fetchall()
    if not rows:
        return Check("self-retrieval", True, "no chunks to sample")
    op = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}[ns.distance]
    q = sql.SQL(
        "SELECT id, content_hash FROM kbctl.chunks WHERE profile_id = {pid} AND namespace_id = %s"
        " ORDER BY embedding::vector({d}) {op} %s::vector({d}) LIMIT 3"
    ).format(pid=sql.Literal(ns.profile_id), d=sql.Literal(ns.dimension), op=sql.SQL(op))
    found = 0
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        for cid, h, emb in rows:
            top = conn.execute(q, (ns.id, emb)).fetchall()
            found += any(r[0] == cid or r[1] == h for r in top)
    return Check("self-retrieval", found == len(rows), f"{found}/{len(rows)} sampled chunks found themselves in the top 3")
