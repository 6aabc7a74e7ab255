"""Shaping the fused order into a page: at most ``per_doc`` chunks per document, near-duplicate
texts dropped (shingles with prefix filtering). Texts are compared by their words, a CJK run by its
character bigrams (``kbctl.textutil.analyze.plain_words``): Chinese or Japanese has no spaces, and a
whole clause as one word made near-duplicates look unrelated."""

from __future__ import annotations

import math
from typing import Any

from ..textutil.analyze import plain_words

__all__ = ["shape", "shingles", "near_duplicate", "Distinct", "ShingleIndex"]


def shape(fused, rows, per_doc: int, dedupe: float, limit: int | None = None):
    """Keep at most ``per_doc`` chunks per document and drop near-duplicate texts.

    Walks the fused order and stops once ``limit`` hits are kept (the page, or the reranker's
    window): what comes after cannot change them, and the near-duplicate check is quadratic.
    """
    out: list[tuple[Any, float]] = []
    per: dict[tuple, int] = {}
    distinct = Distinct(dedupe)
    for key, score in fused:
        if limit is not None and len(out) >= limit:
            break
        r = rows.get(key)
        if r is None:
            continue
        doc = (r[0], r[2])
        if per_doc and per.get(doc, 0) >= per_doc:
            continue
        if not distinct.keep(r[3]):
            continue
        per[doc] = per.get(doc, 0) + 1
        out.append((key, score))
    return out


class Distinct:
    """The near-duplicate rule of a page, walked best first: ``keep(text)`` is False for an exact
    copy (up to case and punctuation) or a near-duplicate (shingles' Jaccard ≥ ``threshold``) of a
    text kept before, else True, and the text is kept. A threshold of 1 keeps every text.
    ``shape`` applies it to one search's page, the merge of a search over several profiles to the
    merged page (``kbctl.search.engine.run_grouped``)."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.index = ShingleIndex(threshold)
        self.exact: set[int] = set()

    def keep(self, text: str) -> bool:
        if self.threshold >= 1.0:
            return True
        words = plain_words(text)
        same = hash(tuple(words))  # an exact copy (up to case and punctuation) needs no shingles
        if same in self.exact:
            return False
        sh = shingles(words)
        if self.index.has_near_duplicate(sh):
            return False
        self.exact.add(same)
        self.index.add(sh)
        return True


class ShingleIndex:
    """The shingle sets kept so far, indexed by their prefixes (prefix filtering): a set's prefix is
    its ``|s| − ⌈t·|s|⌉ + 1`` smallest hashes, and two sets with Jaccard ≥ t always share a prefix
    element (J ≥ t implies |a ∩ b| ≥ t·max(|a|, |b|)). So a new set is compared, exactly, only with
    the kept sets that share one; about 10 index entries per set at t = 0.9 instead of every pair.
    Comparing 100 hits pairwise cost ~5,000 set intersections per query, the largest part of an
    eval's depth-100 search."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.sets: list[frozenset[int]] = []
        self.index: dict[int, list[int]] = {}
        self._last: tuple[frozenset[int], list[int]] = (frozenset(), [])

    def _prefix(self, sh: frozenset[int]) -> list[int]:
        n = len(sh)
        return sorted(sh)[: max(1, n - math.ceil(self.threshold * n) + 1)]

    def has_near_duplicate(self, sh: frozenset[int]) -> bool:
        if not sh:
            return False
        self._last = (sh, self._prefix(sh))
        candidates = {i for h in self._last[1] for i in self.index.get(h, ())}
        return any(near_duplicate(sh, self.sets[i], self.threshold) for i in candidates)

    def add(self, sh: frozenset[int]) -> None:
        i = len(self.sets)
        self.sets.append(sh)
        prefix = self._last[1] if self._last[0] is sh else self._prefix(sh)
        for h in prefix:
            self.index.setdefault(h, []).append(i)


def shingles(text: str | list[str]) -> frozenset[int]:
    """Word 3-shingles of ``text`` (or of its words, lower-cased; ``plain_words``: a CJK run's words are
    its bigrams), single words if shorter, as hashes:
    set operations on ints are several times faster than on tuples of strings, and a 64-bit
    collision is negligible here."""
    w = plain_words(text) if isinstance(text, str) else text
    return frozenset(map(hash, zip(w, w[1:], w[2:]))) or frozenset(map(hash, w))


def near_duplicate(a: frozenset, b: frozenset, threshold: float) -> bool:
    """Jaccard(a, b) >= threshold; sets whose sizes alone rule it out (J ≤ min/max) are skipped."""
    if not a or not b:
        return False
    la, lb = len(a), len(b)
    if min(la, lb) < threshold * max(la, lb):
        return False
    inter = len(a & b)
    return inter >= threshold * (la + lb - inter)
