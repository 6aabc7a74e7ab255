"""Prompt-ready context: numbered passages with citations that fit a token budget.

Tokens are counted with a simple, model-independent estimate (words and punctuation marks, about
what LLM tokenizers produce for English text, rounded up by 1/3 for sub-word splits), so the block
fits the budget of any common chat model. Passages are added best-first; one that does not fit is
cut at a sentence boundary if at least half of it fits (the best passage is always cut to fit
rather than left out), else left out.
"""

from __future__ import annotations

import math
import re

from ..types import Hit, SearchResult
from ..validate import count

__all__ = ["context_blocks", "estimate_tokens", "format_context", "prefix_within"]

# Scripts written without spaces (CJK ideographs, kana, hangul, Thai): a tokenizer spends about one
# token a character, so each is counted as a word.
_UNSPACED = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_UNSPACED}]|[^\W{_UNSPACED}]+|[^\w\s]")
_SENT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")  # CJK full stops need no space after them
#: A run of word characters longer than this counts one token per this many (a URL, a hash, a run
#: with no spaces): English words are within it, so English is counted as a word a token.
_RUN = 8


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for LLM prompts: words, punctuation marks and characters of
    unspaced scripts, and long runs by their length, rounded up by 1/3 for sub-word splits."""
    words = sum(-(-len(w) // _RUN) for w in _TOKEN.findall(text))
    return math.ceil(words * 4 / 3)


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
        block = head + h.text.strip() + "\n"
        cost = estimate_tokens(block)
        if used + cost <= budget:
            parts.append((h, block))
            used += cost
            continue
        room = budget - used - estimate_tokens(head + _MORE)  # the marker of a cut counts too
        cut = _cut(h.text.strip(), room)
        if cut and (not parts or estimate_tokens(cut) * 2 >= estimate_tokens(h.text)):
            parts.append((h, head + cut + _MORE))
            used += estimate_tokens(head + cut + _MORE)
        break
    return parts


_MORE = " […]\n"  # ends a passage cut to fit


def _cut(text: str, room: int) -> str:
    out = ""
    for s in _SENT.split(text):
        nxt = (out + " " + s).strip()
        if estimate_tokens(nxt) > room:
            break
        out = nxt
    if not out and room > 0:  # one long sentence: cut at a word
        for w in text.split():
            if estimate_tokens(out + " " + w) > room:
                break
            out = (out + " " + w).strip()
    if not out and room > 0:  # not even a word fits: an unspaced script, or one long run
        out = prefix_within(text, room)
    return out
