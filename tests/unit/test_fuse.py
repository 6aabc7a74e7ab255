"""Fusion of lane results: RRF and convex, both-lanes boost, document-level ranks, order inside a document."""

from __future__ import annotations

import pytest

from kbctl.errors import UsageError
from kbctl.search.fuse import fuse
from kbctl.search.lanes import LaneHit

NS = 1


def lane(*hits: tuple[int, int, float]) -> list[LaneHit]:
    """Hits from (chunk_id, document_id, score), best first."""
    return [LaneHit(NS, c, s, i, d) for i, (c, d, s) in enumerate(hits, 1)]


def order(fused) -> list[int]:
    return [cid for (_ns, cid), _score in fused]


def test_a_single_lane_passes_through_unchanged():
    hits = lane((7, 1, 3.5), (8, 2, 1.0))
    assert fuse({"lexical": hits}) == [((NS, 7), 3.5), ((NS, 8), 1.0)]


@pytest.mark.parametrize("method", ["rrf", "convex"])
def test_found_by_both_lanes_ranks_above_found_by_one(method):
    lexical = lane((1, 10, 9.0), (2, 20, 5.0), (3, 30, 1.0))
    dense = lane((4, 40, 0.9), (2, 20, 0.8), (5, 50, 0.1))
    fused = fuse({"lexical": lexical, "dense": dense}, method=method)
    assert order(fused)[0] == 2  # second in both lanes beats first in one
    assert len(fused) == 5


def test_rrf_scores_are_reciprocal_ranks():
    lexical = lane((1, 10, 9.0), (2, 20, 5.0))
    dense = lane((2, 20, 0.9), (3, 30, 0.5))
    scores = dict(fuse({"lexical": lexical, "dense": dense}, rrf_k=60))
    assert scores[(NS, 2)] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[(NS, 1)] == pytest.approx(1 / 61)
    assert scores[(NS, 3)] == pytest.approx(1 / 62)


def test_ranks_are_counted_in_documents():
    # Document 100 is found by the lexical lane through chunk 1 and by the dense lane through chunk 2;
    # document 200's one chunk is second in both lanes, behind other chunks of document 100.
    lexical = lane((1, 100, 9.0), (11, 100, 8.0), (3, 200, 7.0))
    dense = lane((2, 100, 0.9), (12, 100, 0.8), (3, 200, 0.7))
    fused = fuse({"lexical": lexical, "dense": dense}, rrf_k=60)
    scores = dict(fused)
    # Chunk-level RRF would put chunk 3 first (1/63 + 1/63 > 1/61); as documents, 100 is first in both lanes.
    assert order(fused)[0] in (1, 2)
    assert scores[(NS, order(fused)[0])] == pytest.approx(2 / 61)
    assert scores[(NS, 3)] == pytest.approx(2 / 62)  # second document in both lanes
    assert order(fused)[1] == 3


def test_chunks_of_one_document_keep_the_order_of_their_own_evidence():
    lexical = lane((1, 100, 9.0), (3, 100, 8.0), (2, 100, 7.0))
    dense = lane((1, 100, 0.9), (2, 100, 0.8))
    fused = fuse({"lexical": lexical, "dense": dense}, rrf_k=60)
    scores = dict(fused)
    assert order(fused) == [1, 2, 3]  # 2 is found by both lanes, 3 by one
    assert scores[(NS, 1)] > scores[(NS, 2)] > scores[(NS, 3)]  # no ties among a document's chunks


def test_hits_without_a_document_count_as_their_own_documents():
    lexical = [LaneHit(NS, 1, 9.0, 1), LaneHit(NS, 2, 8.0, 2)]
    dense = [LaneHit(NS, 2, 0.9, 1)]
    assert order(fuse({"lexical": lexical, "dense": dense})) == [2, 1]


def test_convex_weights_the_lanes():
    lexical = lane((1, 10, 10.0), (2, 20, 0.0))
    dense = lane((2, 20, 1.0), (1, 10, 0.0))
    assert order(fuse({"lexical": lexical, "dense": dense}, method="convex", dense_weight=0.8))[0] == 2
    assert order(fuse({"lexical": lexical, "dense": dense}, method="convex", dense_weight=0.2))[0] == 1


def test_unknown_fusion_is_a_usage_error():
    with pytest.raises(UsageError):
        fuse({"lexical": lane((1, 1, 1.0)), "dense": lane((1, 1, 1.0))}, method="borda")


def test_a_lane_with_one_hit_counts_it_as_its_best():
    # Only document 20 holds the query's word: the lexical lane's one hit is its best, not its worst
    # (min-max over one score used to give it 0, as if the lane had missed it).
    lexical = lane((2, 20, 4.2))
    dense = lane((1, 10, 0.9), (2, 20, 0.5), (3, 30, 0.1))
    fused = fuse({"lexical": lexical, "dense": dense}, method="convex", dense_weight=0.5)
    assert order(fused)[0] == 2
    assert dict(fused)[(NS, 2)] == pytest.approx(0.5 + 0.5 * 0.5)


def test_convex_hits_tied_in_a_lane_all_count_as_its_best():
    lexical = lane((1, 10, 2.0), (2, 20, 2.0))
    dense = lane((1, 10, 0.7), (2, 20, 0.7))
    assert dict(fuse({"lexical": lexical, "dense": dense}, method="convex")) == {(NS, 1): 1.0, (NS, 2): 1.0}
