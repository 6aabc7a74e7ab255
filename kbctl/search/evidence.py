"""Evidence for a claim and breadth for a topic, over search hits: key terms, claim similarity,
evidence signals, feedback terms, MMR and grouping by document.

``kb.verify_claim`` and ``kb.research`` (``kbctl.api``) are built from these, and the agent tools
``verify_claim`` and ``research_topic`` (``kbctl.server``) call those. Words are compared with the
one analyzer of the lexical lane (``kbctl.textutil``: its stopwords, its Snowball stems).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..config import Profile
from ..textutil.analyze import Analyzer, has_cjk
from ..types import Hit, SearchResult
from .context import estimate_tokens, prefix_within

__all__ = [
    "ClaimCheck",
    "Research",
    "key_terms",
    "claim_similarities",
    "evidence_signals",
    "feedback_terms",
    "mmr",
    "group_by_document",
    "snip",
]

# A sentence ends at . ! ? before a space, or at a full-width full stop, exclamation or question mark
# of CJK text, which needs none.
_SENT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")


@dataclass(frozen=True)
class ClaimCheck:
    """What ``kb.verify_claim`` found: the hybrid search of the claim, its key terms, and per hit
    (in the result's order) the evidence signals, ``supports`` among them."""

    claim: str
    result: SearchResult
    key_terms: list[str]
    signals: list[dict[str, Any]]
    thresholds: dict[str, float]

    @property
    def evidence_found(self) -> bool:
        """True when a passage passes both thresholds (it is about the claim; it may contradict it)."""
        return any(s["supports"] for s in self.signals)


@dataclass(frozen=True)
class Research:
    """What ``kb.research`` found: the first search of the topic, the sub-queries made from its
    feedback terms and their searches, and the MMR-picked passages grouped by document within the budget."""

    topic: str
    result: SearchResult
    sub_queries: list[str]
    sub_results: list[SearchResult]
    feedback_terms: list[str]
    documents: list[dict[str, Any]] = field(default_factory=list)

    @property
    def withheld(self) -> int:
        """The hits the access gate withheld over all of the searches, each counted once (a hit
        withheld from the topic's search and a sub-query's is one); 0 when they were filtered."""
        searches = [self.result, *self.sub_results]
        marks = frozenset().union(*(r.withheld_marks for r in searches))
        return max(len(marks), *(r.withheld for r in searches))


def key_terms(text: str, analyzer: Analyzer) -> list[str]:
    """The content words of ``text`` (lowercase, no stopwords, one per stem), in order."""
    seen: dict[str, str] = {}
    for w in analyzer.words(text):
        if len(w) > 1:
            seen.setdefault(analyzer.stem(w), w)
    return list(seen.values())


def claim_similarities(
    claim: str, hits: Sequence[Hit], vectors: Mapping[tuple[str, int | str], Any], profiles: Mapping[str, Profile]
) -> dict[tuple[str, int | str], float]:
    """Cosine similarity of the claim's embedding and each hit's stored chunk vector, keyed by
    (namespace, chunk_id): for every hit, also those only the lexical lane found (whose dense lane
    score is unknown). The claim is embedded once per profile among the hits' namespaces."""
    import numpy as np

    from ..embed import get_embedder

    claims: dict[str, Any] = {}
    out: dict[tuple[str, int | str], float] = {}
    for h in hits:
        v = vectors.get((h.namespace, h.chunk_id))
        if v is None:
            continue
        prof = profiles[h.namespace]
        if prof.name not in claims:
            q = np.asarray(get_embedder(prof, purpose="query").embed_query(claim), dtype=np.float32)
            claims[prof.name] = q / (np.linalg.norm(q) or 1.0)
        out[(h.namespace, h.chunk_id)] = round(float(claims[prof.name] @ (v / (np.linalg.norm(v) or 1.0))), 6)
    return out


def evidence_signals(h: Hit, terms: list[str], analyzer: Analyzer, similarity: float | None = None) -> dict[str, Any]:
    """Dense similarity (``similarity``, else the dense lane's score), share of the key terms found
    (compared on their stems) and lane agreement."""
    stems = {analyzer.stem(w) for w in analyzer.words(h.text + " " + h.title)}
    found = [t for t in terms if analyzer.stem(t) in stems]
    dense, lexical = h.lanes.get("dense") or {}, h.lanes.get("lexical") or {}
    agree = sum(1 for lane in (dense, lexical) if lane.get("rank") is not None) / 2
    return {
        "dense_similarity": similarity if similarity is not None else dense.get("score"),
        "key_terms_found": round(len(found) / max(len(terms), 1), 3),
        "matched_terms": found,
        "lane_agreement": agree,
    }


def feedback_terms(topic: str, hits: Sequence[Hit], analyzer: Analyzer, n: int = 5) -> list[str]:
    """The words most frequent across the feedback passages (in two or more when there are several),
    not in the topic; ties in the order they first appear. A Latin (or other spaced) word counts when
    longer than three letters, a CJK word (a bigram, the analyzer's unit) when of two characters or more."""
    own = {analyzer.stem(t) for t in key_terms(topic, analyzer)}
    df: Counter[str] = Counter()
    for h in hits:
        words = key_terms(h.text, analyzer)
        # dict.fromkeys, not a set: a set of strings iterates in an order that varies by process
        # (hash randomisation), and most_common keeps insertion order among ties
        df.update(list(dict.fromkeys(w for w in words if _feedback_word(w) and analyzer.stem(w) not in own)))
    floor = 2 if len(hits) > 2 else 1
    return [w for w, c in df.most_common(n * 3) if c >= floor][:n]


def _feedback_word(w: str) -> bool:
    """Long enough to be a feedback term: a CJK bigram is a word (``len(w) > 3`` never held for
    one, so research of a Chinese topic made no sub-queries); a Latin word of three letters is not."""
    if w.isdigit():
        return False
    return len(w) > 1 if has_cjk(w) else len(w) > 3


def mmr(
    hits: list[Hit],
    vectors: Mapping[tuple[str, int | str], Any],
    lambda_: float,
    n: int,
    spaces: Mapping[str, Any] | None = None,
) -> list[Hit]:
    """Maximal marginal relevance: each next hit the most relevant and least like those picked.

    ``spaces`` (namespace → its profile's fingerprint), when given: two hits are compared only when
    their vectors are of one profile; a hit is not like one whose vector another model made (its
    similarity to it unknown, 0), and no two models' vectors are multiplied."""
    import numpy as np

    def rel(h: Hit) -> float:
        return h.relevance if h.relevance is not None else (h.score or 0.0)

    def unit(h: Hit):
        v = vectors.get((h.namespace, h.chunk_id))
        return None if v is None else v / (np.linalg.norm(v) or 1.0)

    def same(a: Hit, b: Hit) -> bool:
        return spaces is None or spaces.get(a.namespace) == spaces.get(b.namespace)

    units = {id(h): unit(h) for h in hits}
    left, picked = sorted(hits, key=rel, reverse=True), list[Hit]()
    while left and len(picked) < n:

        def score(h: Hit) -> float:
            u = units[id(h)]
            sims = [
                float(u @ units[id(p)]) for p in picked if u is not None and units[id(p)] is not None and same(h, p)
            ]
            return lambda_ * rel(h) - (1 - lambda_) * max(sims, default=0.0)

        best = max(left, key=score)
        picked.append(best)
        left.remove(best)
    return picked


def group_by_document(hits: list[Hit], budget: int) -> list[dict]:
    """Passages grouped by document (first picked first), added while they fit ``budget`` tokens."""
    docs: dict[tuple[str, int | str], dict] = {}
    used = 0
    for h in hits:
        cost = estimate_tokens(h.text) + 20
        if used + cost > budget:
            text = snip(h.text)
            cost = estimate_tokens(text) + 20
            if used + cost > budget:
                continue
        else:
            text = h.text
        used += cost
        d = docs.setdefault(
            (h.namespace, h.doc_id),
            {"doc_id": h.doc_id, "title": h.title, "source": h.source, "namespace": h.namespace, "passages": []},
        )
        d["passages"].append({"chunk_id": h.chunk_id, "citation": h.citation, "relevance": h.relevance, "text": text})
    return list(docs.values())


def snip(text: str, tokens: int = 60) -> str:
    """``text`` cut to its first sentences within about ``tokens`` tokens (words, when one sentence is
    longer; characters, for an unspaced script or a run with no word to cut at). A sentence of CJK
    text ends at its full stop (。！？) with no space after it."""
    out = ""
    for sep, s in _sentences(text.strip()):
        if out and estimate_tokens(out + sep + s) > tokens:
            break
        out = (out + sep + s).strip()
    if estimate_tokens(out) <= tokens:
        return out
    cut = " ".join(out.split()[: tokens * 3 // 4])
    if estimate_tokens(cut) > tokens:  # words too long to count on (an unspaced script, a long run)
        cut = prefix_within(cut, tokens - 1)
    return cut + " …"


def _sentences(text: str) -> list[tuple[str, str]]:
    """The sentences of ``text``, each with what joins it to the one before: a space where
    whitespace parted them, nothing after a CJK full stop that had none."""
    out: list[tuple[str, str]] = []
    pos, sep = 0, ""
    for m in _SENT.finditer(text):
        if m.start() > pos:
            out.append((sep, text[pos : m.start()]))
        sep, pos = (" " if m.group() else ""), m.end()
    if pos < len(text):
        out.append((sep, text[pos:]))
    return out
