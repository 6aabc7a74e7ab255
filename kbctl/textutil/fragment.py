"""Text-fragment links (``#:~:text=start,end``): a web citation that opens the page at the passage.

Browsers that support text fragments (Chrome, Edge, Safari, Firefox 131+) scroll to and mark the
first stretch of the page from ``start`` to ``end``; others open the page as usual. The passage's
first and last words are taken from its text as kbctl stored it: Markdown table rules, pipes and
emphasis marks are left out, since the page does not show them.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urldefrag

__all__ = ["text_fragment_link"]

_WORD = re.compile(r"[^\s|*_`#>]+")
_RULE = re.compile(r"^:?-{3,}:?$")
_EDGE = 4  # words at each end of the passage


def text_fragment_link(url: str, text: str) -> str | None:
    """``url`` (its own fragment dropped) with a text fragment for ``text``; ``None`` without words."""
    words = [w for w in _WORD.findall(text) if not _RULE.match(w)]
    if not words:
        return None
    base = urldefrag(url)[0]
    if len(words) <= 2 * _EDGE:
        return f"{base}#:~:text={_encode(' '.join(words))}"
    return f"{base}#:~:text={_encode(' '.join(words[:_EDGE]))},{_encode(' '.join(words[-_EDGE:]))}"


def _encode(s: str) -> str:
    """Percent-encoding, with the three characters the syntax reserves (``- , &``) encoded too."""
    return quote(s, safe="").replace("-", "%2D")
