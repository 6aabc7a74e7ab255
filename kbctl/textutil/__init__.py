"""Text helpers that every layer may use: the BM25 analyzer, ISO 8601 dates, cleaning (``clean``).

They sit at the bottom with ``types`` and ``errors`` (they import no other kbctl module), so the
store and the search engine share one analyzer, and extraction and date filters one date format.
"""
