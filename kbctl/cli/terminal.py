"""Text made inert for terminals: what the CLI prints is never a control sequence.

A stored document's text, title and file name, an item's error message, a warning about a source:
all are data someone else wrote, and a terminal acts on the control characters in what it is
given (``ESC [2J`` clears it, ``ESC ]0;…BEL`` sets its title, a C1 ``CSI`` recolours it, a bidi
override makes a line read differently than it is). So:

- ``printable`` writes each such character as a visible escape (``\\x1b``, ``\\u202e``) in text
  for people (tables, Markdown, context blocks, notes, warnings, the error line). Newline and tab
  are kept where the layout needs them (``keep``). Rich markup is not this module's: the callers
  print data with markup off (``kbctl.cli.render``, ``kbctl.cli.state``).
- ``inert_json`` does the same to the JSON the CLI prints, through JSON's own ``\\uXXXX`` escape:
  ``json.dumps`` already escapes C0 and DEL, but with ``ensure_ascii=False`` it writes C1 and bidi
  characters raw. The text decodes to exactly the stored value.

- stdout in another encoding than UTF-8 (a locale such as ``en_US.ISO-8859-1``) cannot write every
  stored character: ``json_line`` then escapes all but ASCII (the same value once parsed), and
  ``fit_stdout`` makes text for people show the rest as escapes (``\\u2192``), never a
  ``UnicodeEncodeError``.

No rich import here: the fast path (``kbctl.cli.fast``) uses it for JSON.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from typing import Any

__all__ = ["fit_stdout", "inert_json", "json_line", "printable"]

# C0 but newline and tab (they are ``keep``'s to allow), DEL, C1; the Arabic letter mark, LRM, RLM,
# and the bidi embeddings, overrides and isolates.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_LAYOUT = "\n\t"
_UNSAFE_IN_JSON = re.compile(f"[{_CONTROLS}]")


@functools.lru_cache(maxsize=8)
def _unsafe(keep: str) -> re.Pattern[str]:
    return re.compile(f"[{_CONTROLS}{''.join(c for c in _LAYOUT if c not in keep)}]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: object, keep: str = _LAYOUT) -> str:
    """``text`` with every control character a terminal acts on written as a visible escape;
    the characters of ``keep`` (newline, tab, both or neither) are left as they are."""
    s = text if isinstance(text, str) else str(text)
    return _unsafe(keep).sub(_escape, s)


def inert_json(text: str) -> str:
    """A JSON text with its control characters as ``\\uXXXX`` escapes (the same value once parsed).

    Outside strings JSON holds only ASCII punctuation, letters and whitespace, so a control
    character can only be inside a string, where the escape means the same character."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _stdout_is_unicode() -> bool:
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
    return encoding.startswith(("utf8", "utf16", "utf32"))


def json_line(obj: Any) -> str:
    """``obj`` as one line of JSON for stdout: exact, inert (``inert_json``), and in characters
    stdout's encoding can write (non-ASCII escaped when it is not a Unicode encoding)."""
    return inert_json(json.dumps(obj, ensure_ascii=not _stdout_is_unicode(), default=str)) + "\n"


def flush_stdout() -> None:
    """Flush stdout before the process exits; a reader that left (``kbctl fetch … | head -1``) is
    not an error: what is left goes nowhere. Without this, Python's own flush at shutdown meets the
    closed pipe, prints "Exception ignored … BrokenPipeError" and exits 120, when the reader left
    after kbctl's last write into its buffer but before that buffer was flushed."""
    import os

    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # ValueError: stdout closed already
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def fit_stdout() -> None:
    """On a stdout that is not Unicode, write what it cannot encode as a backslash escape: text
    for people stays readable where it would have raised ``UnicodeEncodeError``."""
    if not _stdout_is_unicode() and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
