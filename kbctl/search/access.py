"""The access gate inside a search: what the principal may not view is dropped before anything
that can be observed is computed from it.

``kbctl.acl`` says what an ACL means; this module applies a ``Gate``:

- to the lanes (``gate_lanes``), before fusion: each lane keeps the hits the principal may view,
  ranked again among themselves, so fused scores, lane ranks, feedback (PRF), near-duplicate
  removal, per-document caps, reranking and paging are computed from viewable hits only. A
  withheld document that matches a query or a filter changes nothing of what is returned;
- once more to the page (``gated_page``), with the ACL read with each hit's row: what changed
  between the two reads is withheld too. When fewer than k hits survive shaping and more
  candidates were ranked, a window four times larger is shaped again; when the lanes themselves
  were full, the engine runs them again with four times the candidates
  (``kbctl.search.engine.run_search``).

Withheld hits are only counted, and the count is reported only for queries without filters
(``kbctl.search.engine``; README "Access control"). The gate fails closed: whatever cannot be
decided is withheld, and an error while gating withholds the whole page rather than returning it
unfiltered.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..acl import Gate

log = logging.getLogger(__name__)

__all__ = ["anonymous_gate", "gate_lanes", "gated_page", "viewable", "withheld_marks", "ACL_COLUMN"]

ACL_COLUMN = 11  # the document ACL's place in a hit row (sql/queries/search/hits.sql)

Key = tuple[int, int]


#: The key of ``withheld_marks``, new in each process: a mark is no chunk id, not even by trying them all.
_MARK_KEY = secrets.token_bytes(16)


def withheld_marks(keys: Iterable[Key]) -> frozenset[bytes]:
    """An opaque mark per withheld hit: the same chunk's is the same within this process, so the
    marks of several searches tell how many distinct hits they withheld together (``kb.research``),
    and nothing of which (a keyed hash, its key never leaves the process)."""
    return frozenset(
        hashlib.blake2b(f"{ns}:{chunk}".encode(), key=_MARK_KEY, digest_size=16).digest() for ns, chunk in keys
    )


def anonymous_gate(namespace_ids: Sequence[int]) -> Gate:
    """The gate of a search made without one: anonymous, every namespace's default ``public``."""
    return Gate(None, {i: "public" for i in namespace_ids})


def viewable(
    gate: Gate, keyed: Sequence[tuple[Key, Any]], acls: Mapping[Key, Any]
) -> tuple[list[tuple[Key, Any]], int]:
    """``keyed`` (key, score) pairs the gate lets through, in order, and how many it withheld.

    A key without a known ACL row is withheld (the chunk is gone or was never read).
    """
    kept: list[tuple[Key, Any]] = []
    withheld = 0
    try:
        for key, score in keyed:
            if key in acls and gate.allows(key[0], acls[key]):
                kept.append((key, score))
            else:
                withheld += 1
    except Exception:  # never the unfiltered list
        log.exception("the access gate failed; withholding the page")
        return [], len(keyed)
    return kept, withheld


def gate_lanes(
    gate: Gate, lanes: Mapping[str, Sequence[Any]], acls_of: Callable[[list[Key]], Mapping[Key, Any]]
) -> tuple[dict[str, list[Any]], set[Key]]:
    """Each lane's hits (``LaneHit``) the gate lets through, ranked again 1.. among themselves, and
    the keys it withheld. ``acls_of(keys)`` reads the document ACL of each chunk (absent: gone)."""
    if gate.unrestricted:
        return {name: list(hits) for name, hits in lanes.items()}, set()
    keys = sorted({(h.namespace_id, h.chunk_id) for hits in lanes.values() for h in hits})
    acls = acls_of(keys) if keys else {}  # an error here fails the search: never the unfiltered lanes
    kept, _ = viewable(gate, [(key, None) for key in keys], acls)
    allowed = {key for key, _ in kept}
    out: dict[str, list[Any]] = {}
    for name, hits in lanes.items():
        mine = [h for h in hits if (h.namespace_id, h.chunk_id) in allowed]
        out[name] = [dataclasses.replace(h, rank=i) for i, h in enumerate(mine, 1)]
    return out, set(keys) - allowed


def gated_page(
    gate: Gate,
    fused: Sequence[tuple[Key, float]],
    rows: dict[Key, tuple],
    k: int,
    limit: int,
    shape: Callable[[int], list[tuple[Key, float]]],
    rerank: Callable[[list], tuple[list, bool]],
    fetch: Callable[[list[Key]], dict[Key, tuple]],
) -> tuple[list[tuple[Key, float]], bool, dict[Key, int]]:
    """The first k viewable hits of ``fused``: (hits, reranked, the keys withheld ahead of the k-th
    kept, each with its place: how many kept hits rank above it).

    ``shape(window)`` shapes the first ``window`` hits from ``rows`` (which ``fetch`` extends with
    more candidates' rows when needed), ``rerank`` reorders a shaped page.
    """
    window = limit
    while True:
        shaped = shape(window)
        ordered, reranked = rerank(shaped)
        kept, withheld = _first_k(gate, ordered, rows, k)
        if len(kept) >= k or (len(shaped) < window and not _more_rows(fused, rows, fetch)):
            return kept, reranked, withheld
        window *= 4


def _first_k(
    gate: Gate, ordered: list[tuple[Key, float]], rows: dict[Key, tuple], k: int
) -> tuple[list, dict[Key, int]]:
    """The first k viewable of ``ordered``, and the hits ranked above the last of them that were
    withheld, each with how many kept ones rank above it."""
    acls = {key: rows[key][ACL_COLUMN] for key, _ in ordered if key in rows}
    kept: list[tuple[Key, float]] = []
    withheld: dict[Key, int] = {}
    for key, score in ordered:
        ok, _ = viewable(gate, [(key, score)], acls)
        if ok:
            kept.append((key, score))
            if len(kept) >= k:
                break
        else:
            withheld[key] = len(kept)
    return kept, withheld


def _more_rows(fused: Sequence[tuple[Key, float]], rows: dict[Key, tuple], fetch) -> bool:
    """Read the rows of the fused candidates not read yet; whether there were any."""
    missing = [key for key, _ in fused if key not in rows]
    before = len(rows)
    if missing:
        rows.update(fetch(missing))
    return len(rows) > before
