"""One tool answer within ``[server] max_output_tokens``, counted whole.

An answer's cost is the token estimate (``kbctl.search.context.estimate_tokens``) of its JSON, as
``json.dumps`` writes it with non-ASCII unescaped (as it is sent): every field counts, ids, citations (with a PDF passage's line boxes),
titles, sources, metadata, the query echoed back, not only the passages' text. A tool builds its
answer as it always has (its page or context held to the cap); an answer still over the cap is cut,
each step only while it is over:

1. long values: a text field other than a passage's or chunk's ``text`` (a title, source, citation,
   heading, link, metadata value, the topic or claim echoed back) longer than ``field_tokens(cap)``
   (1/20 of the cap, at least 8) is cut to it, longest first, ending with the cut marker ``[…]``
   (research's topic first, in itself and in each sub-query, whose feedback term stays); a
   citation's ``boxes`` longer than that are left out (its ``page`` stays), a list of terms
   (``key_terms``, ``matched_terms``) is cut from its end, and a metadata value that is a list or
   an object becomes its JSON text, cut the same way;
2. the lowest-ranked items leave, the best one always stays: a page's last passages or chunks
   (``next_cursor`` then resumes at the first left out), a budgeted context's last passages (it is
   made again within a smaller budget, so the last one it holds may be cut at a sentence), the
   last document's last passages of research_topic, verify_claim's passages that do not support
   the claim before those that do;
3. any text, the last item's too, is cut to 8 tokens at the least, longest first (and, for
   ``get_document``, metadata keys leave from the last).

The answer says ``truncated: true`` when a value was cut or an item left out that no
``next_cursor`` leads to (absent otherwise, so an answer under the cap is as it always was). A cut
keeps the tool's schema: a value is shortened, never retyped, except a metadata value (free-form),
and what opens a passage (``resource``, ids, ``namespace``, ``next_cursor``) is never cut. A cap
below an answer's bare skeleton cannot be met: that answer is as small as the steps make it.
"""

from __future__ import annotations

import json
from typing import Any

from ..search.context import estimate_tokens, prefix_within

__all__ = ["CUT", "FIXED", "FLOOR", "TERMS", "cost", "field_tokens", "shorten", "squeeze", "long_values", "drop_tail"]

CUT = "[…]"
"""Ends a value cut to fit the cap."""

FIXED = frozenset({"resource", "namespace", "next_cursor", "strategy", "doc_id", "chunk_id", "query_id"})
"""Keys whose text is never cut: they name or open something, and a cut one would not."""

FLOOR = 8
"""No text is cut below this many estimated tokens."""

TERMS = frozenset({"key_terms", "matched_terms", "feedback_terms"})
"""Lists of words (a claim's key terms, those a passage holds): cut from their end, as a whole."""


def cost(obj: Any) -> int:
    """The estimated tokens of ``obj`` as JSON as the JSON API and MCP send it: UTF-8, not escaped
    (escaped, a Greek letter is five pieces, ``\\u03b1``, where it is sent as one)."""
    return estimate_tokens(json.dumps(obj, default=str, ensure_ascii=False))


def field_tokens(cap: int) -> int:
    """How long one value other than a passage's text may be in an answer over ``cap``."""
    return max(FLOOR, cap // 20)


def shorten(text: str, tokens: int) -> str:
    """``text`` within ``tokens`` estimated tokens: as is, or its head (cut at a word when it has
    one) and the marker ``[…]``."""
    if estimate_tokens(text) <= tokens:
        return text
    head = prefix_within(text, max(0, tokens - estimate_tokens(CUT)))
    if " " in head.strip() and not text[len(head) : len(head) + 1].isspace():
        head = head.rstrip().rsplit(" ", 1)[0]  # a word cut in two: leave it out
    return (head.rstrip() + " " + CUT).lstrip()


def _strings(obj: Any, skip: frozenset[str]) -> list[tuple[Any, Any]]:
    """Every (container, key) of ``obj`` holding a string, but under a key of ``skip`` (a document's
    ``metadata`` is free-form: its keys are not the answer's, and none is skipped)."""
    out: list[tuple[Any, Any]] = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        if isinstance(v, str):
            if k not in skip:
                out.append((obj, k))
        elif isinstance(v, (dict, list)):
            out.extend(_strings(v, frozenset() if k == "metadata" else skip))
    return out


def squeeze(obj: Any, cap: int, tokens: int, skip: frozenset[str] = FIXED) -> bool:
    """Cut ``obj``'s strings longer than ``tokens`` to ``tokens``, longest first, in place, until
    ``cost(obj)`` is within ``cap`` (or none is longer); whether one was cut."""
    cut = False
    while (now := cost(obj)) > cap:
        refs = [(c, k) for c, k in _strings(obj, skip) if estimate_tokens(c[k]) > tokens]
        if not refs:
            break
        refs.sort(key=lambda r: -estimate_tokens(r[0][r[1]]))
        for c, k in refs:
            old = c[k]
            c[k] = shorten(old, tokens)
            cut = True
            now -= cost(old) - cost(c[k])
            if now <= cap:
                break  # by the running estimate: measured again whole
    return cut


def long_values(obj: Any, tokens: int, metadata: dict | None = None) -> bool:
    """Step 1's values that are not one text, in place: every ``boxes`` longer than ``tokens`` left
    out, every list of ``TERMS`` cut from its end to ``tokens`` (one term stays), and each value of
    ``metadata`` that is a list or an object and longer than ``tokens`` made its JSON text
    (``squeeze`` then cuts it); whether one was."""
    changed = False
    if metadata is not None:
        for k, v in metadata.items():
            if isinstance(v, (dict, list)) and cost(v) > tokens:
                metadata[k] = json.dumps(v, default=str, ensure_ascii=False)
                changed = True
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "boxes" in node and isinstance(node["boxes"], list) and cost(node["boxes"]) > tokens:
                del node["boxes"]
                changed = True
            for key in TERMS & node.keys():
                terms = node[key]
                if isinstance(terms, list) and cost(terms) > tokens:
                    while len(terms) > 1 and cost(terms) > tokens:
                        terms.pop()
                    changed = True
            stack.extend(v for k, v in node.items() if k != "metadata")
        elif isinstance(node, list):
            stack.extend(node)
    return changed


def drop_tail(obj: Any, items: list, cap: int, keep: int = 1) -> int:
    """Remove ``items`` from the end (in place, ``items`` being part of ``obj``) while ``cost(obj)``
    is over ``cap``, keeping ``keep``; how many left."""
    n = 0
    now = cost(obj)
    while now > cap and len(items) > keep:
        now -= cost(items.pop()) + 1  # and its comma
        n += 1
        if now <= cap:
            now = cost(obj)  # the running estimate says it fits: measured again whole
    return n
