"""The chunker's revision (``SENTENCE_ENDS``, part of every source's hash) and, for each earlier
revision, what a stored chunk holds when this chunker may cut its source otherwise
(``MOVED_SINCE``, ``moved_since``: a PostgreSQL regular expression, read by ``kbctl.ingest.producer``)."""

from __future__ import annotations

from ..config import Profile
from .sentences import CJK_LETTERS, UNSPACED_STOPS

#: Where the chunker cuts, named in every source's hash (``kbctl.ingest.steps.source_hash``); the
#: name is the sentence splitter's, whose revisions came first: "sentences-2", the unspaced stops
#: too (session 42); "sentences-3", an ASCII ``?``/``!`` between CJK characters too (session 43);
#: "cuts-4", a fenced code block longer than a chunk cut between lines, each piece fenced, and a
#: table under a caption line or without outer bars cut as a table (session 45); "cuts-5", the
#: semantic strategy keeps a code block or table as one unit, or cuts a longer one as the fixed
#: strategy does (session 45, "Indented code, and code under the semantic strategy"); "cuts-6", a
#: table's caption repeated, marked continued, on its pieces after the first, and a sentence longer
#: than a chunk cut at a line end or between words, never inside one, the piece going on a line cut
#: mid-line opened with ``CUT_MARK`` (session 46, "Chunker leftovers"; cutting back to a list's
#: last ``,``/``;`` was measured and dropped: it shortened Cranfield's chunks, nDCG@10 down 0.006);
#: "cuts-7", a table's row longer than a piece cut between cells, else between words, its pieces
#: after the first under the header and opened with ``CUT_MARK``, and a table whose header is too
#: long to repeat cut as a table, under what of its header fits (session 48, "Long table rows and
#: long headers").
SENTENCE_ENDS = "cuts-7"


#: What a stored chunk holds when this chunker may cut its source otherwise than an earlier
#: revision did (a PostgreSQL regular expression, a superset of the new ends), by that revision
#: ("": before session 42). A source stored under an earlier revision's hash none of whose chunks
#: holds it comes out alike: it takes the new hash without being read again (``kbctl.ingest.producer``).
_MARK_BEFORE_CJK = f"[!?]\\s*[{CJK_LETTERS}]"


#: Since "cuts-4": a fenced code block's opening (a block starts a chunk or follows a blank line in
#: it), a long block being cut otherwise; a ``|``, a table under a caption line or without outer
#: bars being a table now. A chunk of a code block that fits, or of a table read as one before,
#: comes out alike (its vector is kept).
_CODE_OR_TABLE = "(^|\n)(```|~~~)|\\|"


#: Since "cuts-5": a table under a caption line (a chunk opens with one or two lines, then a row
#: holding a ``|`` and a rule: the first piece of such a table; one that fits comes out alike)...
_CAPTIONED_TABLE = "^[^\n]*\n([^\n]*\n)?[^\n]*\\|[^\n]*\n[ \t]*\\|?[ \t]*:?-{3,}"


#: ...and a sentence longer than a chunk, cut into windows: the chunk of its first window holds no
#: sentence end and at least 8 characters (a window is as many tokens as the section's limit,
#: never under 8 with ``chunk.size`` at least 16, a token at least a character). What it tests for
#: a sentence's end is narrower than the splitter's (``_SENTENCE_END``), so it misses no such chunk:
#: ``.!?…`` and a space before a capital or digit, a blank line, a list item's line, a CJK stop
#: before what goes on. Not a piece of a code block (it opens with its fence) nor of a table cut as
#: one (its rule in its first four lines): neither moved, but for one whose opening line or header
#: is too long to repeat (cut as prose: its later pieces match, a last one under 8 characters
#: alone does not). A chunk of one sentence that fits matches too and comes out alike (its vector
#: is kept). (``(?:.|\n)``: PostgreSQL allows no ``\S`` in brackets.)
_LONG_LINE = (
    "^(?!```|~~~)(?!([^\n]*\n){1,3}[ \t]*\\|?[ \t]*:?-{3,})(?!(?:.|\n)*([.!?…][\"')\\]]*\\s+[\"'(\\[]?[A-Z0-9]|\n\\s*[-*•]\\s|\n\n"
    f"|[{UNSPACED_STOPS}][^{UNSPACED_STOPS}」』）〕】〉》”’\"')\\]0-9０-９]))(?:.|\n){{8}}"
)


#: Since "cuts-6": a table's rule line (it holds a ``|``)...
_RULE = "[ \t]*\\|?[ \t]*:?-{3,}:?[ \t]*\\|"


#: ...followed by at most one line to the chunk's end: the piece of a row longer than a piece (its
#: first window is alone under the header) or of a first row cut after the header lines; or a rule
#: twice, the header lines cut by a window and repeated; or, not a code block's piece and with no
#: rule in its first four lines, a first line holding a ``|``: a later piece of a table cut as prose,
#: its header too long to repeat (it starts at a row, or with ``…`` mid-row). A table of one row,
#: or of a row that fills a piece alone, matches too and comes out alike (its vectors are kept).
_TABLE_CUT = (
    f"\n{_RULE}[^\n]*(\n[^\n]*)?$|\n{_RULE}(?:.|\n)*\n{_RULE}"
    "|^(?!```|~~~)(?!([^\n]*\n){0,3}[ \t]*\\|?[ \t]*:?-{3,})[^\n]*\\|"
)


MOVED_SINCE = {
    "cuts-6": _TABLE_CUT,
    "cuts-5": f"{_CAPTIONED_TABLE}|{_LONG_LINE}|{_TABLE_CUT}",
    "cuts-4": f"{_CODE_OR_TABLE}|{_LONG_LINE}",
    "sentences-3": f"{_CODE_OR_TABLE}|{_LONG_LINE}",
    "sentences-2": f"{_MARK_BEFORE_CJK}|{_CODE_OR_TABLE}|{_LONG_LINE}",
    "": f"[{UNSPACED_STOPS}]|{_MARK_BEFORE_CJK}|{_CODE_OR_TABLE}|{_LONG_LINE}",
}


def moved_since(profile: Profile) -> dict[str, str]:
    """``MOVED_SINCE`` for ``profile``: "cuts-5" moved only the semantic strategy's code blocks and
    tables, so a source of another strategy stored under "cuts-4" is read again only for what
    "cuts-6" and "cuts-7" moved (a caption, a long line, a long row, a long header), as one stored
    under "cuts-5"."""
    if profile.chunk.strategy == "semantic":
        return MOVED_SINCE
    return {**MOVED_SINCE, "cuts-4": MOVED_SINCE["cuts-5"]}
