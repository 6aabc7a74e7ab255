"""The verify stage: check that a namespace's store is whole and consistent.

Checks: document/chunk counts agree, no orphans (chunks, postings, child documents), every chunk
has a vector of the pinned profile and dimension, the profile's HNSW index exists, the lexical
statistics match the chunks, and a sample of chunks finds itself in the top 3 of a dense search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import Profile
from .store import checks as store_checks
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
    docs, chunks, declared = store_checks.counts(conn, ns)
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
    postings, children, empty = store_checks.orphans(conn, ns)
    ok = postings == 0 and children == 0 and empty == 0
    return Check("orphans", ok, f"{postings} postings without chunk, {children} attachments without parent, {empty} documents without chunks")


def _vectors(conn, ns: Namespace) -> Check:
    bad = store_checks.bad_vectors(conn, ns)
    return Check("embeddings", bad == 0, f"{bad} chunks without a {ns.dimension}-d vector of profile {ns.profile_name}")


def _pin(ns: Namespace, profile: Profile | None) -> Check:
    if profile is None:
        return Check("profile", True, f"pinned to {ns.profile_name} ({ns.fingerprint})")
    ok = profile.fingerprint == ns.fingerprint and profile.dimension == ns.dimension
    return Check("profile", ok, f"namespace {ns.fingerprint} ({ns.dimension}-d), configured {profile.fingerprint} ({profile.dimension}-d)")


def _index(conn, ns: Namespace) -> Check:
    names = store_checks.index_names(conn)
    need = {hnsw_index_name(ns.profile_id), "lexical_postings_pkey", "chunks_metadata", "chunks_profile_hash"}
    missing = sorted(need - names)
    return Check("indexes", not missing, "missing: " + ", ".join(missing) if missing else "HNSW, lexical and metadata indexes present")


def _lexical(conn, ns: Namespace, chunks: int) -> Check:
    row = store_checks.lexical_statistics(conn, ns)
    n = int(row[0]) if row else 0
    total = store_checks.lexical_length(conn, ns)
    ok = n == chunks and abs(float(row[1] if row else 0) - float(total)) < 1e-3 * max(1.0, float(total))
    return Check("lexical", ok, f"statistics count {n} chunks, store has {chunks}")


def _self_retrieval(conn, ns: Namespace, sample: int) -> Check:
    rows = store_checks.sample_chunks(conn, ns, sample)
    if not rows:
        return Check("self-retrieval", True, "no chunks to sample")
    found = store_checks.self_retrieval(conn, ns, rows)
    return Check("self-retrieval", found == len(rows), f"{found}/{len(rows)} sampled chunks found themselves in the top 3")
