"""Checks and merges of TOML tables, shared by the profile, the sections and the loader.

Every settings class is a frozen dataclass whose fields are typed ``int``, ``float``, ``str``,
``bool`` or ``tuple[str, ...]``; ``part`` builds one from its merged table, every key present, known
and of its field's type, then runs the class's own ``_check(where)``.
"""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import fields
from typing import Any, Mapping, TypeVar

from ..errors import ConfigError

__all__ = ["part", "typed", "check_range", "one_of", "suggest", "merge", "set_dotted", "same_type", "key_line"]

T = TypeVar("T")

_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "tuple[str, ...]": tuple}


def part(cls: type[T], where: str, name: str, table: Any) -> T:
    """One settings dataclass from its merged TOML table, every key present and of its field's type.

    An int is accepted where a float is expected and kept as written, so what hashes it (a source's
    version) is the same as when the parts were plain tables. A list of strings becomes a tuple.
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: '{name}' must be a table", key=name)
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for key in table:
        if key not in names:
            raise ConfigError(f"{where}: unknown key '{name}.{key}'", hint=suggest(key, names), key=f"{name}.{key}")
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in table:
            raise ConfigError(f"{where}: missing key '{name}.{f.name}'", key=name)
        values[f.name] = typed(where, f"{name}.{f.name}", _TYPES[str(f.type)], table[f.name])
    settings = cls(**values)
    settings._check(where)  # type: ignore[attr-defined]
    return settings


def typed(where: str, key: str, want: type, value: Any) -> Any:
    """``value`` if it is a ``want`` (an int for a float; a list of strings, as a tuple, for a tuple)."""
    if want is tuple:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            got = type(value).__name__ if not isinstance(value, (list, tuple)) else "a list holding another type"
            raise ConfigError(f"{where}: '{key}' must be a list of strings, got {got}", key=key)
        return tuple(value)
    ok = isinstance(value, (int, float) if want is float else want)
    if want is not bool and isinstance(value, bool):
        ok = False
    if not ok:
        raise ConfigError(f"{where}: '{key}' must be {want.__name__}, got {type(value).__name__}", key=key)
    return value


def check_range(where: str, key: str, value: float, lo: float | None = None, hi: float | None = None) -> None:
    """A ConfigError unless ``lo <= value <= hi`` (either bound may be absent)."""
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"in {lo}..{hi}" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        raise ConfigError(f"{where}: {key} must be {span}, got {value}", key=key)


def check_positive(where: str, key: str, value: float) -> None:
    """A ConfigError unless ``value > 0`` (a timeout of 0 seconds cannot be met)."""
    if not value > 0:
        raise ConfigError(f"{where}: {key} must be > 0, got {value}", key=key)


def one_of(where: str, key: str, value: str, allowed: Any) -> None:
    """A ConfigError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ConfigError(
            f"{where}: {key} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}", key=key
        )


def same_type(expected: Any, value: Any) -> bool:
    """Whether a user's ``value`` may replace the default ``expected`` (ints and floats mix; bools do not)."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(expected, bool) and isinstance(value, bool)
    if isinstance(expected, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(expected))


def suggest(key: str, known: Any) -> str | None:
    """``did you mean '…'?`` for the known key closest to ``key``, if one is close."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``layer`` merged into ``base`` (tables key by key, other values replaced by a copy); returns ``base``."""
    for k, v in layer.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """``data["a"]["b"] = value`` for ``dotted = "a.b"`` (missing tables are made)."""
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


_HEADER = re.compile(r"^\s*\[\[?(?P<key>[^\]]+)\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(
    r"""^\s*(?P<key>(?:[A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""\s*([A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|'[^']*')\s*(?:\.|$)""")


def _parts(key: str) -> tuple[str, ...]:
    """The parts of a TOML dotted key (``a."b.c".d`` is a, b.c, d)."""
    out = []
    for m in _PART.finditer(key):
        p = m.group(1)
        if p[0] == '"':
            p = p[1:-1].encode().decode("unicode_escape") if "\\" in p else p[1:-1]
        elif p[0] == "'":
            p = p[1:-1]
        out.append(p)
    return tuple(out)


def key_line(text: str, dotted: str) -> int | None:
    """The line (from 1) of ``text`` where the key ``dotted`` (``profiles.x.chunk.size``) is set, or
    where its table begins; None where it cannot be told (an inline table, a multi-line value).

    ``dotted`` may end in an index, ``namespaces.hr.acl_rules[1]``: the line of that entry of a list
    (its ``[[…]]`` header in an array of tables, where it begins in a list written inline), else the
    line of the list's key."""
    index = None
    if m := _INDEX.match(dotted):
        dotted, index = m.group("key"), int(m.group("index"))
    want = tuple(dotted.split("."))
    table: tuple[str, ...] = ()
    lines = text.splitlines()
    seen = 0
    for n, line in enumerate(lines, 1):
        if m := _HEADER.match(line):
            table = _parts(m.group("key"))
            if index is not None and table == want and line.lstrip().startswith("[["):
                if seen == index:
                    return n
                seen += 1
            elif table[: len(want)] == want and index is None:
                return n
        elif m := _ASSIGN.match(line):
            key = table + _parts(m.group("key"))
            if index is not None:
                if key == want:
                    return _item_line(lines, n, line[m.end() :], index) or n
            elif key[: len(want)] == want:
                return n
    return None


_INDEX = re.compile(r"^(?P<key>.+)\[(?P<index>\d+)\]$")


def _item_line(lines: list[str], n: int, rest: str, index: int) -> int | None:
    """The line where item ``index`` begins of the inline list that starts in ``rest`` (what follows
    the ``=`` of line ``n``); strings and comments are skipped."""
    depth, item, expect = 0, -1, False
    for number, part in enumerate([rest, *lines[n:]], n):
        quote = ""
        i = 0
        while i < len(part):
            ch = part[i]
            if quote:
                if ch == "\\" and quote == '"':
                    i += 1
                elif ch == quote:
                    quote = ""
            elif ch == "#":
                break
            elif ch.isspace():
                pass
            else:
                if depth == 1 and expect and ch not in ",]":
                    item, expect = item + 1, False
                    if item == index:
                        return number
                if ch in "\"'":
                    quote = ch
                elif ch in "[{":
                    depth += 1
                    expect = depth == 1
                elif ch in "]}":
                    depth -= 1
                    if depth == 0:
                        return None
                elif ch == "," and depth == 1:
                    expect = True
            i += 1
        if depth == 0 and number > n:
            return None
    return None
