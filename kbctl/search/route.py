"""One retrieval strategy per query, chosen by deterministic rules.

In ``auto`` mode, in this order:

1. ``no_match``: the query has nothing searchable (empty, punctuation, or only stopwords) and there
   are no filters. Nothing is retrieved and the database is not touched.
2. ``metadata``: filters but nothing searchable in the query. Rows that match the filters come back
   in a stable order (document URI, chunk position) with a null score, and are never reranked.
3. ``needs_clarification``: every searchable word of the query is a vague word ("help", "issue",
   "question", "problem", "info"…), so any ranking would be noise; the caller should ask.
4. ``hybrid``: a topic and filters: both lanes run with the filters and are fused.
5. ``content``: a topic and no filters: both lanes run and are fused.

``--mode dense|lexical|hybrid`` forces the lanes (the strategy is still reported; a query with
nothing searchable still gives ``no_match`` or ``metadata``).
"""

from __future__ import annotations

from ..textutil.analyze import Analyzer

__all__ = ["route", "STRATEGIES", "VAGUE_WORDS"]

STRATEGIES = ("metadata", "content", "hybrid", "no_match", "needs_clarification")

VAGUE_WORDS = frozenset(
    """help question questions issue issues problem problems info information something stuff thing
    things anything everything hello hi hey thanks please need want know tell explain details detail
    support ok okay""".split()
)


def route(query: str, has_filters: bool, analyzer: Analyzer) -> str:
    """The strategy for ``query`` (see the module docstring for the rules)."""
    terms = analyzer.terms(query)
    if not terms:
        return "metadata" if has_filters else "no_match"
    words = [w for w in query.lower().replace("?", " ").replace("!", " ").split() if w.strip(".,;:'\"")]
    searchable = [w.strip(".,;:'\"") for w in words if w.strip(".,;:'\"") not in analyzer.stopwords]
    if searchable and all(w in VAGUE_WORDS for w in searchable):
        return "needs_clarification"
    return "hybrid" if has_filters else "content"
