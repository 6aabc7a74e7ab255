"""Checks of the values callers hand the library: counts, names and vectors.

Each check runs once, where the library receives the value (``SearchOptions``, ``KnowledgeBase``,
the store path of items embedded upstream), so the CLI, Python callers and a server share it. A
bad value is a ``UsageError`` (exit 2) that names the input, its allowed range and what was given.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import UsageError, echo

__all__ = ["NAME_PATTERN", "count", "name", "output_file", "targets", "text", "vector_problem"]

# The namespaces table's own CHECK; tenants follow it too.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def count(what: str, value: Any, lo: int, hi: int | None = None, *, flag: str | None = None) -> int:
    """``value`` as an int in ``lo..hi``; anything else (a bool, a float, out of range) is a UsageError."""
    label = f"{what} ({flag})" if flag else what
    span = f"{lo}..{hi}" if hi is not None else f"at least {lo}"
    hint = f"give {flag or what} a whole number {'in ' + span if hi is not None else 'of ' + span}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{label} must be a whole number {span}, got {echo(value)}", hint=hint)
    if value < lo or (hi is not None and value > hi):
        raise UsageError(f"{label} must be {'in ' + span if hi is not None else span}, got {value}", hint=hint)
    return value


def name(kind: str, value: Any) -> str:
    """A tenant or namespace name: a letter or digit first, then letters, digits, ``_ . : -`` (128 at most)."""
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        what = "empty" if value in ("", None) else f"{echo(value)} is not a valid name"
        raise UsageError(
            f"{kind} name: {what}",
            hint=f"a {kind} name starts with a letter or digit, then letters, digits, _ . : - (at most 128)",
        )
    return value


def targets(value: Any) -> list[str]:
    """What an ingest or a fetch reads: one target (a path, URL or ``-`` as a string or a path
    object) or a list of them, each as a string. A string is one target, never its characters (one
    of an absolute path's is ``/``, the root). Anything else is a UsageError."""
    many = [value] if isinstance(value, (str, os.PathLike)) else value
    if isinstance(many, (bytes, bytearray, Mapping)) or not isinstance(many, Iterable):
        many = None
    many = None if many is None else list(many)
    if many is None or not all(isinstance(t, (str, os.PathLike)) for t in many):
        bad = value if many is None else next(t for t in many if not isinstance(t, (str, os.PathLike)))
        raise UsageError(
            f"a target must be a path, URL or '-' as a string, got {echo(bad)}",
            hint="pass one target as a string, or a list of them: kb.ingest(['docs/', 'https://…'], 'ns')",
        )
    return [os.fsdecode(t) for t in many]


def output_file(what: str, path: str | os.PathLike) -> Path:
    """``path`` as a file a command will write its result to (an eval's result, a dataset),
    checked before the work that makes the result: not a folder, in a folder that exists. A file
    where one of its folders should be is named (the write fails under it whoever runs it, root
    too). Anything else is a UsageError naming ``what`` (a flag: ``--json``)."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{what} {out} is a folder", hint=f"give {what} a file name")
    if not out.parent.is_dir():
        found = next((up for up in out.parents if up.exists()), None)
        if found is not None and not found.is_dir():
            raise UsageError(
                f"{what} {out}: {found} is a file, not a folder", hint="write the file in a folder that exists"
            )
        raise UsageError(
            f"{what} {out}: there is no folder {out.parent}",
            hint="create the folder first, or write the file elsewhere",
        )
    return out


def text(what: str, value: Any) -> str:
    """``value`` if it is a string (a query, a claim, a topic); anything else is a UsageError."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a string, got {echo(value)}", hint=f"pass the {what} as text")
    return value


def vector_problem(vector: Any, dimension: int) -> str | None:
    """What is wrong with ``vector`` as a stored embedding of ``dimension`` numbers, or None."""
    import numpy as np

    try:
        v = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        return "is not a list of numbers"
    if v.ndim != 1 or v.shape[0] != dimension:
        return (
            f"has {v.shape[0] if v.ndim == 1 else 'a nested list of'} numbers, the profile's dimension is {dimension}"
        )
    if not np.isfinite(v).all():
        return "holds NaN or an infinite number"
    if not v.any():
        return "is all zeros (it has no direction: no distance to it is defined)"
    if not math.isfinite(float(np.linalg.norm(v.astype(np.float32)))):
        return "overflows single precision"
    return None
