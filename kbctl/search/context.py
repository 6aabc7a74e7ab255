"""Prompt-ready context: numbered passages with citations that fit a token budget.

Tokens are counted with a model-independent estimate meant to be at or over what a chat model's
tokenizer spends, in any script (``estimate_tokens``): a word of ASCII letters is a token (English
is counted as a word a token, rounded up by 1/3 for sub-word splits), and every letter of another
script a token of its own (Greek, Cyrillic, Arabic, Hebrew, Devanagari… as Han and Thai were), as
the tokenizers on the machine count them at worst (docs/hardening.md, session 45).

Passages are added best-first; one that does not fit is cut at a line's or a sentence's end if at least half of it fits (the best passage is always cut to
fit rather than left out), else left out. A cut keeps the passage's own text, line breaks included
(a table is cut between rows, a code block between lines, never inside a table's row), and a code
fence a passage leaves open (cut, or stored so) is closed after it, so the next citation is not read
as code.
"""

from __future__ import annotations

import math
import re

from ..types import Hit, SearchResult
from ..validate import count

__all__ = ["closed_fences", "context_blocks", "estimate_tokens", "format_context", "prefix_within"]

# The pieces the estimate counts: a word of ASCII letters (camelCase, HTTPServer and xFFFF cut where
# a capital starts a word in lower case, as tokenizers cut them), a run of ASCII digits, and every other
# character but a space (a letter or a mark of any other script, a non-ASCII digit, a punctuation
# mark or a symbol, "_" too) on its own. The group holds a run that counts more than one (below),
# so one scan finds both.
_PIECE = re.compile(r"([A-Z]{5,}(?![a-z])|[A-Z]?[a-z]{9,}|[0-9]{4,})|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|\S")
#: A run of ASCII letters longer than this counts one token per this many (a URL's path, a word
#: glued to others, a hash): English words are within it, so English is counted as a word a token.
_RUN = 8
#: A run of digits counts one token per this many: GPT-style tokenizers cut numbers into groups of
#: up to three digits, WordPiece into pieces as short.
_DIGITS = 3
#: A run of more capitals than an acronym's (hex digits, a constant, a shouted word) counts one
#: token more per this many.
_CAPS = 4
# Counted twice: a Hangul syllable (two or three letters, jamo, and tokenizers that do not know it
# spend one a letter), and a character beyond the first 65,536 (an emoji, a rare Han character: four
# bytes in UTF-8, on which byte-level tokenizers often spend two tokens or more).
_TWICE = re.compile("[\uac00-\ud7a3\U00010000-\U0010ffff]")
_SENT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")  # CJK full stops need no space after them


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for LLM prompts: a word of ASCII letters one token (a long one
    one per 8 letters), a number one per 3 digits, every other character but a space one (a letter
    of Greek, Cyrillic, Arabic, Devanagari, Han…, an accented letter, a punctuation mark), a Hangul
    syllable or an emoji two; all rounded up by 1/3 for sub-word splits (README, "--format context").
    A longer prefix of a text is never estimated lower (cuts search for the longest by halves)."""
    runs = _PIECE.findall(text)
    pieces = len(runs) + sum(map(_more, filter(None, runs)))
    if not text.isascii():
        pieces += len(_TWICE.findall(text))
    return math.ceil(pieces * 4 / 3)


def _more(run: str) -> int:
    """The tokens a long run counts beyond its first."""
    if run[0] <= "9":
        return (len(run) - 1) // _DIGITS
    return (len(run) - 1) // (_CAPS if run.isupper() else _RUN)


def prefix_within(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` within ``tokens`` estimated tokens (for text with no sentence
    or word to cut at: an unspaced script, one long run)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def format_context(result: SearchResult, budget: int) -> str:
    """The hits as ``[n] citation`` + text blocks, within ``budget`` estimated tokens (at least 1)."""
    return "\n".join(block for _, block in context_blocks(result, budget))


def context_blocks(result: SearchResult, budget: int) -> list[tuple[Hit, str]]:
    """The blocks of ``format_context``, each with its hit: what the context holds, and so cites."""
    count("budget", budget, 1, flag="--budget")
    parts: list[tuple[Hit, str]] = []
    used = 0
    for h in result.hits:
        link = h.metadata.get("link") if isinstance(h.metadata, dict) else None
        head = f"[{h.rank}] {h.citation}" + (f" <{link}>" if link else "") + "\n"  # a web page: opens at the passage
        text = h.text.strip()
        block = head + closed_fences(text) + "\n"
        cost = estimate_tokens(block)
        if used + cost <= budget:
            parts.append((h, block))
            used += cost
            continue
        room = budget - used - estimate_tokens(head + _MORE)  # the marker of a cut counts too
        cut = _cut(text, room)
        if cut and (not parts or estimate_tokens(cut) * 2 >= estimate_tokens(text)):
            parts.append((h, head + cut + _MORE))
            used += estimate_tokens(head + cut + _MORE)
        break
    return parts


_MORE = " […]\n"  # ends a passage cut to fit
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SPACE = re.compile(r"\s+")


def closed_fences(text: str) -> str:
    """``text`` with a code fence it leaves open closed at its end (a chunk may hold a code block's
    first lines only, or be cut inside one): else the passages after it, and their citations,
    would read as code."""
    fence = None
    for line in text.split("\n"):
        fence = _fence_after(line, fence)
    return text if fence is None else text + "\n" + fence


def _fence_after(line: str, fence: str | None) -> str | None:
    """The code fence open after ``line`` (None: none), given the one open before it: a fence
    closes with a line of at least as many of its characters and nothing after them (CommonMark)."""
    m = _FENCE.match(line)
    if not m:
        return fence
    mark = m.group(1)
    if fence is None:
        return mark
    closes = mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark) :].strip()
    return None if closes else fence


def _ends(text: str) -> tuple[list[int], list[int]]:
    """Where a cut of ``text`` may end: the ends of its lines and of its sentences (a table's rows
    and a code block's lines are cut between lines only), and the ends of its words."""
    lines: list[int] = []
    sentences: list[int] = []
    fence = None
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        before, fence = fence, _fence_after(line, fence)
        if before is None and fence is None and not line.lstrip().startswith("|"):  # prose: its sentences too
            sentences += [start + s.start() for s in _SENT.finditer(line)]
        lines.append(end)
        start = end + 1
    words = [m.start() for m in _SPACE.finditer(text)]
    return sorted(set(lines + sentences)), words


def _cut(text: str, room: int) -> str:
    """The longest prefix of ``text`` within ``room`` tokens (a code fence it opens closed and
    counted) that ends at a line's or a sentence's end; else at a word's; else anywhere. The
    text's own characters, line breaks included: a table keeps its rows, code its lines."""
    if room <= 0:
        return ""
    ends, words = _ends(text)
    for candidates in (ends, words):
        out = _longest(text, room, candidates)
        if out:
            return out
    return prefix_within(text, room)


def _longest(text: str, room: int, ends: list[int]) -> str:
    lo, hi = 0, len(ends)  # the estimate grows with the prefix: the last end within room, found by halves
    while lo < hi:
        mid = (lo + hi) // 2
        if estimate_tokens(text[: ends[mid]]) <= room:
            lo = mid + 1
        else:
            hi = mid
    for i in range(lo - 1, -1, -1):  # a fence closed costs a few tokens more: step back while over
        out = closed_fences(text[: ends[i]].rstrip())
        if out and estimate_tokens(out) <= room:
            return out
    return ""
