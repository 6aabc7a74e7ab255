"""How much memory one process keeps for the packed lexical segments (``[cache]``).

Three caches, each least recently used out past its limit, each per process (a ``kbctl serve``
worker, a library, an eval run: each holds its own copy):

* ``forward_mb``: the segments' forward indexes (``kbctl.search.forward``), which bounded feedback
  (``prf = "rescore"``, the default) scores its candidates from; about 8 bytes a posting (44 MB at
  100k chunks, 510 MB at a million). 0: none is read, and the candidates are scored by the SQL
  statement (``search/candidate_bm25.sql``), slower (docs/benchmarks.md "Feedback step cost").
* ``segments_mb``: the segments' chunk ids and lengths (``kbctl.search.termarrays``), which the
  lexical lane ranks with; 16 bytes a chunk. 0: read again by every search.
* ``term_rows_mb``: the posting rows of frequent terms (20,000 postings or more) the lexical lane
  keeps between searches. 0: read again by every search.

``configure`` sets them (``kbctl.open`` does, from the settings, and so does assigning
``kb.settings``); a cache over its new limit is cut at once. A positive limit smaller than one segment still keeps that one segment.
"""

from __future__ import annotations

import sys

__all__ = ["configure", "limits", "FORWARD_BYTES", "DOCS_BYTES", "ROW_BYTES"]

MB = 1 << 20
#: Memory kept for segments' forward indexes (bytes); 0: off.
FORWARD_BYTES = 512 * MB
#: Memory kept for segments' chunk ids, lengths and length norms (bytes); 0: off.
DOCS_BYTES = 512 * MB
#: Memory kept for frequent terms' posting rows (bytes); 0: off.
ROW_BYTES = 256 * MB


def configure(*, forward_mb: int, segments_mb: int, term_rows_mb: int) -> None:
    """Set the three limits (megabytes; 0 turns a cache off) and cut the caches to them."""
    global FORWARD_BYTES, DOCS_BYTES, ROW_BYTES
    FORWARD_BYTES, DOCS_BYTES, ROW_BYTES = forward_mb * MB, segments_mb * MB, term_rows_mb * MB
    for name in ("kbctl.search.forward", "kbctl.search.termarrays"):
        module = sys.modules.get(name)  # not imported yet: nothing is held, and nothing to import
        if module is not None:
            module.trim()


def limits() -> dict[str, int]:
    """The limits in force, in bytes."""
    return {"forward": FORWARD_BYTES, "segments": DOCS_BYTES, "term_rows": ROW_BYTES}
