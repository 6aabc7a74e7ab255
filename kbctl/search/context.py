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

__all__ = ["context_blocks", "estimate_tokens", "format_context"]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENT = re.compile(r"(?<=[.!?])\s+")


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for LLM prompts."""
    return math.ceil(len(_TOKEN.findall(text)) * 4 / 3)


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
        room = budget - used - estimate_tokens(head)
        cut = _cut(h.text.strip(), room)
        if cut and (not parts or estimate_tokens(cut) * 2 >= estimate_tokens(h.text)):
            parts.append((h, head + cut + " […]\n"))
            used += estimate_tokens(head + cut) + 2
        break
    return parts


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
    return out
