"""The lane-agreement predictor that decides whether a query takes feedback (kbctl.search.prf)."""

from __future__ import annotations

from kbctl.search.lanes import LaneHit
from kbctl.search.prf import lane_agreement


def _lane(docs: list[int], chunks_per_doc: int = 1) -> list[LaneHit]:
    hits, rank = [], 0
    for d in docs:
        for c in range(chunks_per_doc):
            rank += 1
            hits.append(LaneHit(1, d * 10 + c, 1.0 / rank, rank, d))
    return hits


def test_agreement_counts_shared_documents_among_the_first_ten():
    assert lane_agreement({"lexical": _lane(list(range(10))), "dense": _lane(list(range(10)))}) == 1.0
    assert lane_agreement({"lexical": _lane(list(range(10))), "dense": _lane(list(range(10, 20)))}) == 0.0
    assert lane_agreement({"lexical": _lane(list(range(1, 11))), "dense": _lane([1, 2, *range(30, 38)])}) == 0.2
    # a lane that found fewer documents: the share of the shorter list
    assert lane_agreement({"lexical": _lane(list(range(1, 11))), "dense": _lane([1, 2, 30, 40])}) == 0.5
    # documents, not chunks: three chunks of one document count once
    assert lane_agreement({"lexical": _lane([1, 2], chunks_per_doc=3), "dense": _lane([2, 5])}) == 0.5
    # a document beyond a lane's first ten does not count
    assert lane_agreement({"lexical": _lane(list(range(20))), "dense": _lane([15, *range(30, 39)])}) == 0.0


def test_an_empty_lane_agrees_with_nothing():
    assert lane_agreement({"lexical": [], "dense": _lane([1])}) == 0.0
    assert lane_agreement({"lexical": _lane([1])}) == 0.0
