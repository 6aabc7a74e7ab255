"""The verify stage: check that a namespace's store is whole and consistent.

Checks: document/chunk counts agree, no orphans (chunks, postings, child documents), every chunk
has a vector of the pinned profile and dimension, the profile's HNSW index exists, the lexical
statistics match the chunks, and a sample of chunks is whole (``self-retrieval``): each is found by
an exact search for its own vector (no index), every stored copy of its text (its content hash)
has the same vector, and its postings add up to its lexical length. These check the data; any
failure fails verify (exit 3).

How well the HNSW index finds the same sampled chunks is a separate figure, ``hnsw-recall``: the
share found in the HNSW top k (the profile's ``search.k``) at the profile's ``hnsw.ef_search``, run
as a search runs. Below ``RECALL_WARNING`` it is a warning, never a failure: an approximate index
that misses some chunks at a low ef_search holds the same data as one that does not (raise
``hnsw.ef_search``, or run ``kbctl db optimize`` after many replacements).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..config import Profile
from ..errors import CheckFailed
from ..store import checks as store_checks
from ..store.generations import hnsw_index_name
from ..store.namespaces import Namespace
from ..validate import count

__all__ = ["Check", "VerifyReport", "verify_namespace", "RECALL_WARNING"]

RECALL_WARNING = 0.9  # an HNSW recall figure below this is a warning (never a failure)
_NO_PROFILE = (10, 40, 20000)  # k, ef_search and max_scan_tuples without a profile: pgvector's defaults


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    severity: str = "error"  # "warning": reported, but verify still holds


@dataclass(frozen=True)
class VerifyReport:
    namespace: str
    checks: tuple[Check, ...]
    counts: dict[str, int] = field(default_factory=dict)
    recall: dict[str, Any] = field(default_factory=dict)  # the HNSW recall figure and what it was measured at

    @property
    def ok(self) -> bool:
        """Whether the data holds: every check but the warnings passed."""
        return all(c.ok for c in self.checks if c.severity == "error")

    @property
    def warnings(self) -> list[Check]:
        """The warning checks that did not hold (the HNSW recall figure below ``RECALL_WARNING``)."""
        return [c for c in self.checks if c.severity == "warning" and not c.ok]

    def problem(self) -> CheckFailed | None:
        """The failed check (exit 3) naming the checks that did not hold, for stderr after the
        report (a cron job's log then says why); None when verify holds."""
        failed = [c.name for c in self.checks if c.severity == "error" and not c.ok]
        if not failed:
            return None
        return CheckFailed(
            f"verify of namespace {self.namespace!r} failed: {', '.join(failed)}",
            hint="each check's detail is in the report on stdout (--json: checks)",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "ok": self.ok,
            "counts": self.counts,
            "recall": self.recall,
            "warnings": [f"{c.name}: {c.detail}" for c in self.warnings],
            "checks": [{"name": c.name, "ok": c.ok, "severity": c.severity, "detail": c.detail} for c in self.checks],
        }


def verify_namespace(conn, ns: Namespace, profile: Profile | None = None, sample: int = 20) -> VerifyReport:
    """Run every check on ``ns``; ``profile`` (when given) must match the namespace's pin."""
    count("sample", sample, 1, flag="--sample")
    docs, chunks, declared = store_checks.counts(conn, ns)
    rows = store_checks.sample_chunks(conn, ns, sample)
    looked = store_checks.sample_lookup(conn, ns, [r[0] for r in rows]) if rows else {}
    recall, figure = _recall(conn, ns, profile, rows, looked)
    checks = [
        Check("counts", declared == chunks, f"{docs} documents, {chunks} chunks (documents declare {declared})"),
        _orphans(conn, ns),
        _vectors(conn, ns),
        _pin(ns, profile),
        _index(conn, ns),
        _lexical(conn, ns, chunks),
        _self_retrieval(rows, looked),
        recall,
    ]
    return VerifyReport(ns.name, tuple(checks), {"documents": int(docs), "chunks": int(chunks)}, figure)


def _orphans(conn, ns: Namespace) -> Check:
    postings, children, empty = store_checks.orphans(conn, ns)
    ok = postings == 0 and children == 0 and empty == 0
    return Check(
        "orphans",
        ok,
        f"{postings} postings without chunk, {children} attachments without parent, {empty} documents without chunks",
    )


def _vectors(conn, ns: Namespace) -> Check:
    bad = store_checks.bad_vectors(conn, ns)
    return Check(
        "embeddings",
        bad == 0,
        f"{bad} chunks without a {ns.dimension}-d vector of profile {ns.profile_name} (generation {ns.generation_id})",
    )


def _pin(ns: Namespace, profile: Profile | None) -> Check:
    if profile is None:
        return Check("profile", True, f"pinned to {ns.profile_name} ({ns.fingerprint})")
    ok = profile.fingerprint == ns.fingerprint and profile.dimension == ns.dimension
    return Check(
        "profile",
        ok,
        f"namespace {ns.fingerprint} ({ns.dimension}-d), configured {profile.fingerprint} ({profile.dimension}-d)",
    )


def _index(conn, ns: Namespace) -> Check:
    names = store_checks.index_names(conn)
    need = {hnsw_index_name(ns.generation_id), "lexical_postings_pkey", "metadata_values_pkey", "chunks_content_hash"}
    missing = sorted(need - names)
    return Check(
        "indexes",
        not missing,
        "missing: " + ", ".join(missing) if missing else "HNSW, lexical and metadata indexes present",
    )


def _lexical(conn, ns: Namespace, chunks: int) -> Check:
    row = store_checks.lexical_statistics(conn, ns)
    n = int(row[0]) if row else 0
    total = store_checks.lexical_length(conn, ns)
    ok = n == chunks and abs(float(row[1] if row else 0) - float(total)) < 1e-3 * max(1.0, float(total))
    return Check("lexical", ok, f"statistics count {n} chunks, store has {chunks}")


def _self_retrieval(rows: list[tuple], looked: dict[int, tuple]) -> Check:
    """The sampled chunks' data, looked up exactly: found by their own vector, like their copies, posted."""
    if not rows:
        return Check("self-retrieval", True, "no chunks to sample")
    problems: Counter[str] = Counter()
    for cid, _h, _e in rows:
        got = looked.get(cid)
        if got is None:
            problems["gone while verifying"] += 1
            continue
        own, nearer, other_vectors, length, posted, bad_lengths = got
        if own is None or math.isnan(own) or nearer >= 3:
            problems["not found by an exact search for its own vector"] += 1
        if other_vectors:
            problems["a copy of its text has another vector"] += 1
        if abs(float(posted) - float(length)) > 1e-3 * max(1.0, float(length)) or bad_lengths:
            problems["postings that disagree with its lexical length"] += 1
    detail = f"{len(rows) - sum(problems.values())}/{len(rows)} sampled chunks whole (found by an exact search for their own vector, copies alike, postings complete)"
    if problems:
        detail += "; " + ", ".join(f"{n} {what}" for what, n in problems.items())
    return Check("self-retrieval", not problems, detail)


def _recall(
    conn, ns: Namespace, profile: Profile | None, rows: list[tuple], looked: dict[int, tuple]
) -> tuple[Check, dict]:
    """The share of sampled chunks the HNSW top k finds at the profile's ef_search: a warning below RECALL_WARNING."""
    k, ef, max_scan = (
        (profile.search.k, profile.hnsw.ef_search, profile.hnsw.max_scan_tuples) if profile else _NO_PROFILE
    )
    if not rows:
        return Check("hnsw-recall", True, "no chunks to sample", "warning"), {}
    own = [(cid, h, e, (looked.get(cid) or (None,))[0]) for cid, h, e in rows]
    found = store_checks.hnsw_found(conn, ns, own, k, ef_search=ef, max_scan_tuples=max_scan)
    share = found / len(rows)
    figure = {
        "hnsw": round(share, 4),
        "found": found,
        "sampled": len(rows),
        "k": k,
        "ef_search": ef,
        "threshold": RECALL_WARNING,
    }
    detail = (
        f"{found}/{len(rows)} sampled chunks in the HNSW top {k} at ef_search {ef} ({share:.0%});"
        f" below {RECALL_WARNING:.0%} is a warning: raise hnsw.ef_search (a profile setting), or run `kbctl db optimize` after many replacements"
    )
    return Check("hnsw-recall", share >= RECALL_WARNING, detail, "warning"), figure
