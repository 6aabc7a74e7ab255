"""Front matter of Markdown files: YAML between ``---`` lines, TOML between ``+++`` lines.

TOML is parsed with ``tomllib``. YAML is parsed by ``parse_simple_yaml``, a small safe parser of
the subset front matter uses (``key: value``, quoted strings, ``[a, b]`` inline lists, ``- item``
block lists, ``|``/``>`` block strings, comments). Our own parser goes first even when PyYAML is
installed, so the same file gives the same metadata (and content hash) on every machine, and so
``time: 12:30`` stays ``"12:30"`` instead of YAML 1.1's 750. Only what it does not support
(nested mappings, anchors, flow mappings) is handed to PyYAML's safe loader when that is importable;
without PyYAML the unsupported lines are skipped.

Bounded: a block over ``MAX_FRONT_MATTER_BYTES`` is not parsed; PyYAML's composer stops past
``MAX_METADATA_DEPTH`` levels (before Python's recursion limit); and the parsed value is copied by
``json_safe``, which stops at ``MAX_METADATA_BYTES``, so aliases (``b: &b [*a, *a…]``) that would
expand a few hundred bytes into gigabytes cost a few milliseconds and are refused. A refused block is
a front matter that does not parse: the body is kept, the reason recorded as a warning.

Scalars: ``true``/``false`` → bool, ``null``/``~``/empty → None, decimal ints and floats →
numbers, everything else (ISO dates included) → strings.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from typing import Any

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from .base import MAX_METADATA_DEPTH, MetadataTooLarge, json_safe

__all__ = ["split_front_matter", "parse_simple_yaml", "UnsupportedYAML", "FrontMatterRefused", "MAX_FRONT_MATTER_BYTES"]

#: A front-matter block larger than this is not parsed (PyYAML reads about 1 MB a second).
MAX_FRONT_MATTER_BYTES = 256 << 10

log = logging.getLogger(__name__)

_YAML_OPEN = re.compile(r"\A---[ \t]*\n")
_YAML_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$\n?", re.M)
_TOML_OPEN = re.compile(r"\A\+\+\+[ \t]*\n")
_TOML_CLOSE = re.compile(r"^\+\+\+[ \t]*$\n?", re.M)
_KEY = re.compile(r"""^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s"'#\-\[\]{}?:][^:#]*?)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$""")
_ITEM = re.compile(r"^([ \t]*)-(?:[ \t]+(.*?))?[ \t]*$")
_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?$")
#: Lines longer than this go to PyYAML: the subset's patterns take quadratic time on a long line of spaces.
_MAX_LINE = 4096
_BOOLS = {"true": True, "false": False}
_NULLS = {"", "~", "null"}


class UnsupportedYAML(ValueError):
    """The YAML uses something outside the simple front-matter subset."""


class FrontMatterRefused(ValueError):
    """Front matter past a bound (size, nesting, alias expansion): hostile, not mistyped."""


#: A front-matter block that names an ACL (``acl:``, ``acl =``): unread, its document may not be public.
_NAMES_ACL = re.compile(r"""^[ \t]*["']?acl["']?[ \t]*[:=]""", re.M)
_REFUSED_HINT = (
    "front matter is a small table of metadata: under 256 KB, nested at most 32 levels,"
    " without YAML aliases that expand; fix or remove it and ingest again"
)


def split_front_matter(text: str) -> tuple[dict[str, Any], str, str | None]:
    """``(metadata, body, error)``: the front matter parsed and removed from the text.

    A block that does not parse leaves ``metadata`` empty and ``error`` set; the block is still
    removed from the body (it is not prose). Fail closed: when the unread block names an ``acl``,
    ``metadata`` is ``{"acl": []}`` (viewable by no one) rather than the namespace's default. A block
    past a bound (``FrontMatterRefused``, ``MetadataTooLarge``: an alias bomb, thousands of levels)
    refuses the item: ``ExtractError``. Text without front matter comes back unchanged.
    """
    for opening, closing, parse in ((_YAML_OPEN, _YAML_CLOSE, _parse_yaml), (_TOML_OPEN, _TOML_CLOSE, _parse_toml)):
        head = opening.match(text)
        if not head:
            continue
        end = closing.search(text, head.end())
        if not end:
            return {}, text, None  # an opening rule without a closing one is a thematic break
        raw, body = text[head.end() : end.start()], text[end.end() :]
        try:
            return _datetimes_in_utc(json_safe(_bounded(parse, raw))), body, None
        except (FrontMatterRefused, MetadataTooLarge) as e:
            raise ExtractError(f"front matter refused: {e}", hint=_REFUSED_HINT) from None
        except ValueError as e:
            log.warning("front matter not parsed: %s", e)
            if _NAMES_ACL.search(raw):
                why = f"{type(e).__name__}: {e} (it names an acl: the document is viewable by no one until it is read)"
                return {"acl": []}, body, why
            return {}, body, f"{type(e).__name__}: {e}"
    return {}, text, None


_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$")


def _datetimes_in_utc(meta: dict[str, Any]) -> dict[str, Any]:
    """Top-level datetimes written with an offset (``2024-05-01 12:00+02:00``) as UTC
    (``2024-05-01T10:00:00Z``), the form every other extractor stores, so date filters compare them."""
    from datetime import datetime

    out = dict(meta)
    for key, value in meta.items():
        if isinstance(value, str) and _DATETIME.match(value.strip()):
            try:
                dt = datetime.fromisoformat(value.strip().replace(" ", "T", 1))
            except ValueError:
                continue
            out[key] = iso_datetime(dt)
    return out


def _bounded(parse, raw: str) -> Any:
    """``parse(raw)`` for a block within ``MAX_FRONT_MATTER_BYTES``; nesting past Python's limit is a ValueError."""
    if len(raw) > MAX_FRONT_MATTER_BYTES:
        raise FrontMatterRefused(f"front matter larger than {MAX_FRONT_MATTER_BYTES >> 10} KB")
    try:
        return parse(raw)
    except RecursionError:  # tomllib recurses once per nested array or table
        raise FrontMatterRefused("front matter nested too deeply") from None


def _parse_toml(raw: str) -> dict[str, Any]:
    import tomllib

    return tomllib.loads(raw)  # TOMLDecodeError is a ValueError


def _parse_yaml(raw: str) -> dict[str, Any]:
    """Our subset parser; PyYAML (when installed) only for what the subset does not cover."""
    try:
        return parse_simple_yaml(raw)
    except UnsupportedYAML:
        try:
            import yaml
        except ImportError:
            return parse_simple_yaml(raw, strict=False)
    try:
        data = yaml.load(raw, Loader=_bounded_loader(yaml))
    except yaml.YAMLError as e:
        raise ValueError(str(e).splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ValueError("YAML front matter is not a mapping")
    return data


@functools.cache
def _bounded_loader(yaml: Any) -> type:
    """PyYAML's ``SafeLoader`` whose composer refuses nodes nested past ``MAX_METADATA_DEPTH``."""

    class BoundedLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            try:
                if self.depth > MAX_METADATA_DEPTH:
                    raise FrontMatterRefused(f"front matter nested more than {MAX_METADATA_DEPTH} levels deep")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def parse_simple_yaml(raw: str, *, strict: bool = True) -> dict[str, Any]:
    """Parse the front-matter subset of YAML into a dict.

    With ``strict`` (the default) anything outside the subset raises ``UnsupportedYAML``;
    otherwise such lines are skipped.
    """
    lines = raw.split("\n")
    if any(len(line) > _MAX_LINE for line in lines):
        if strict:
            raise UnsupportedYAML(f"a line longer than {_MAX_LINE} characters")
        lines = [line for line in lines if len(line) <= _MAX_LINE]
    out: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_blank(line):
            i += 1
            continue
        m = _KEY.match(line) if not line[0].isspace() else None
        if m is None:
            _unsupported(f"line {i + 1}: {line.strip()[:40]!r}", strict)
            i += 1
            continue
        try:
            value, i = _value(m.group(2) or "", lines, i + 1)
        except UnsupportedYAML:
            if strict:
                raise
            i = _skip_indented(lines, i + 1)
            continue
        out[_key(m.group(1))] = value
    return out


def _value(text: str, lines: list[str], nxt: int) -> tuple[Any, int]:
    """The value after ``key:`` and the index of the line after it."""
    text = _strip_comment(text)
    if text in ("", "~", "null") and nxt < len(lines) and _starts_block(lines[nxt:]):
        return _block_list(lines, nxt)
    if text[:1] in ("|", ">") and re.fullmatch(r"[|>][+-]?", text):
        return _block_string(text[0], lines, nxt)
    if text.startswith("["):
        return _inline_list(text), nxt
    if text.startswith(("{", "&", "*", "!")):
        raise UnsupportedYAML(f"unsupported value {text[:20]!r}")
    if nxt < len(lines) and lines[nxt][:1].isspace() and not _is_blank(lines[nxt]):
        raise UnsupportedYAML("nested mapping or multi-line value")
    return scalar(text), nxt


def _starts_block(rest: list[str]) -> bool:
    """Whether the next non-blank line is a ``- item`` or an indented (nested) line."""
    for line in rest:
        if not _is_blank(line):
            return bool(_ITEM.match(line)) or line[:1].isspace()
    return False


def _block_list(lines: list[str], i: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while i < len(lines):
        if _is_blank(lines[i]):
            i += 1
            continue
        m = _ITEM.match(lines[i])
        if not m:
            if lines[i][:1].isspace():
                raise UnsupportedYAML("nested mapping")
            break
        item = _strip_comment(m.group(2) or "")
        if _KEY.match(item) or item.startswith(("[", "{", "-", "&", "*", "!", "|", ">")):
            raise UnsupportedYAML("list of mappings or nested list")
        items.append(scalar(item))
        i += 1
    return items, i


def _block_string(style: str, lines: list[str], i: int) -> tuple[str, int]:
    """``|`` keeps line breaks, ``>`` folds lines into spaces (blank lines stay breaks)."""
    body: list[str] = []
    while i < len(lines) and (lines[i][:1].isspace() or _is_blank(lines[i])):
        body.append(lines[i])
        i += 1
    indent = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
    body = [b[indent:] for b in body]
    if style == "|":
        return "\n".join(body).strip("\n"), i
    paragraphs = "\n".join(body).strip("\n").split("\n\n")
    return "\n".join(" ".join(p.split()) for p in paragraphs), i


def _inline_list(text: str) -> list[Any]:
    if not text.endswith("]"):
        raise UnsupportedYAML("multi-line flow list")
    inner = text[1:-1]
    if any(c in inner for c in "[]{}") and not _all_quoted(inner):
        raise UnsupportedYAML("nested flow collection")
    return [scalar(p) for p in _split_commas(inner) if p.strip()]


def _split_commas(text: str) -> list[str]:
    """Split on commas that are not inside quotes."""
    parts: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _all_quoted(inner: str) -> bool:
    return all(p[:1] in "\"'" and p[-1:] == p[:1] for p in _split_commas(inner) if p)


def scalar(text: str) -> Any:
    """One YAML scalar: quoted string, bool, null, int, float, or plain string."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return json.loads(text)
        except ValueError:
            return text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    low = text.lower()
    if low in _BOOLS:
        return _BOOLS[low]
    if low in _NULLS:
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text) and any(c in text for c in ".eE"):
        return float(text)
    return text


def _key(text: str) -> str:
    value = scalar(text)
    return value if isinstance(value, str) else text


def _strip_comment(text: str) -> str:
    """Drop a trailing `` # comment`` that is outside quotes."""
    text = text.strip()
    if text and text[0] in "\"'":
        end = _closing_quote(text)
        rest = text[end + 1 :].strip() if end != -1 else ""
        return text[: end + 1] if end != -1 and (not rest or rest.startswith("#")) else text
    return "" if text.startswith("#") else re.split(r"[ \t]+#", text, maxsplit=1)[0].strip()


def _closing_quote(text: str) -> int:
    """Index of the quote closing the one at ``text[0]`` (``\\"`` and ``''`` are escapes), or -1."""
    q, i = text[0], 1
    while i < len(text):
        if (q == '"' and text[i] == "\\") or (text[i] == q and q == "'" and text[i + 1 : i + 2] == "'"):
            i += 2
        elif text[i] == q:
            return i
        else:
            i += 1
    return -1


def _is_blank(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


def _skip_indented(lines: list[str], i: int) -> int:
    while i < len(lines) and (lines[i][:1].isspace() or _ITEM.match(lines[i]) or not lines[i].strip()):
        i += 1
    return i


def _unsupported(what: str, strict: bool) -> None:
    if strict:
        raise UnsupportedYAML(what)
