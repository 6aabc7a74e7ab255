"""Glob patterns for ``--include``/``--exclude`` and the rules of ``.kbctlignore`` files.

Paths are matched in POSIX form, relative to a folder (the walked target, or the folder holding
the ``.kbctlignore``). The syntax is the common subset of shell globs and ``.gitignore``:

- ``*`` matches within one path segment, ``?`` one character, ``[abc]``/``[!abc]`` a set;
- ``**/`` matches zero or more folders (``**/*.md``), a trailing ``/**`` everything below a folder
  (``drafts/**`` also names the folder ``drafts`` itself, so it can be skipped without walking it);
- a pattern without a ``/`` matches the last segment at any depth (``*.md``, ``node_modules``);
  one with a ``/`` matches the whole relative path (a leading ``/`` only anchors it);
- a trailing ``/`` matches folders only; in ``.kbctlignore`` a leading ``!`` re-includes.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["Pattern", "compile_glob", "any_match", "parse_ignore", "load_ignore", "ignored", "IGNORE_FILE"]

log = logging.getLogger(__name__)

IGNORE_FILE = ".kbctlignore"


@dataclass(frozen=True)
class Pattern:
    """One compiled glob or ignore rule."""

    text: str
    regex: re.Pattern[str]
    basename: bool = False  # no "/" in the pattern: match the last segment only
    dir_only: bool = False  # trailing "/": folders only
    negate: bool = False  # leading "!" (ignore files only): re-include

    def matches(self, rel: str, is_dir: bool) -> bool:
        """Whether the relative POSIX path ``rel`` (a folder when ``is_dir``) matches."""
        if self.dir_only and not is_dir:
            return False
        target = rel.rsplit("/", 1)[-1] if self.basename else rel
        return self.regex.fullmatch(target) is not None


def compile_glob(text: str, *, negate: bool = False) -> Pattern:
    """Compile one pattern (see the module docstring for the syntax)."""
    body = text.strip()
    dir_only = body.endswith("/") and body != "/"
    body = body.rstrip("/")
    basename = "/" not in body
    body = body.lstrip("/")
    return Pattern(text, re.compile(_translate(body)), basename=basename, dir_only=dir_only, negate=negate)


def _translate(glob: str) -> str:
    """A glob as a regular expression (without anchors: callers use ``fullmatch``)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        segment_start = i == 0 or glob[i - 1] == "/"
        if glob.startswith("**", i) and segment_start and glob.startswith("/", i + 2):
            out.append("(?:.*/)?")  # "**/": zero or more folders
            i += 3
        elif glob.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")  # trailing "/**": the folder and everything below it
            i = n
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            cls, i = _char_class(glob, i)
            out.append(cls)
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _char_class(glob: str, i: int) -> tuple[str, int]:
    """Translate ``[...]`` starting at ``glob[i]``; an unclosed ``[`` is a literal, and a class the
    regex engine refuses (a reversed range, ``[z-a]``) matches nothing, as in git and fnmatch: it
    once raised out of the walk and failed the whole folder."""
    j = i + 1
    if j < len(glob) and glob[j] in "!^":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    end = glob.find("]", j)
    if end < 0:
        return re.escape("["), i + 1
    inner = glob[i + 1 : end].replace("\\", "\\\\")
    cls = f"[^/{inner[1:]}]" if inner[:1] in ("!", "^") else f"[{inner}]"
    try:
        re.compile(cls)
    except re.error as e:
        log.warning("glob %r: %s; the class [%s] matches nothing", glob, e, inner)
        return "(?!)", end + 1
    return cls, end + 1


def any_match(patterns: Sequence[Pattern], rel: str, is_dir: bool) -> bool:
    """Whether any pattern matches ``rel``."""
    return any(p.matches(rel, is_dir) for p in patterns)


def parse_ignore(lines: Iterable[str]) -> tuple[Pattern, ...]:
    """The rules of a ``.kbctlignore`` file, in order (the last matching rule wins)."""
    rules = []
    for raw in lines:
        line = raw.rstrip("\r\n").rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith(("\\#", "\\!")):
            line = line[1:]
        if line.strip("/"):
            rules.append(compile_glob(line, negate=negate))
    return tuple(rules)


def load_ignore(folder: Path) -> tuple[Pattern, ...]:
    """The rules of ``folder/.kbctlignore`` (none when it is missing or unreadable)."""
    path = folder / IGNORE_FILE
    try:
        # a FIFO or a device named .kbctlignore must not hang the walk: it is never opened, and the
        # open does not block (nor is the file read) should one take the file's place after the stat
        if not stat.S_ISREG(os.stat(path).st_mode):
            log.warning("%s is not a regular file; its rules are not applied", path)
            return ()
        with open(path, encoding="utf-8", errors="replace", opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                log.warning("%s is not a regular file; its rules are not applied", path)
                return ()
            return parse_ignore(f)
    except FileNotFoundError:
        return ()
    except OSError as e:
        log.warning("cannot read %s (%s); its rules are not applied", path, e.strerror or e)
        return ()


def ignored(rule_sets: Sequence[tuple[str, tuple[Pattern, ...]]], rel: str, is_dir: bool) -> bool:
    """Whether the ``.kbctlignore`` files above ``rel`` exclude it.

    ``rule_sets`` holds ``(folder, rules)`` from the walk root down, ``folder`` relative to the
    root; rules are matched against the path relative to their own folder and the last match wins.
    """
    result = False
    for base, rules in rule_sets:
        sub = rel[len(base) + 1 :] if base else rel
        for rule in rules:
            if rule.matches(sub, is_dir):
                result = not rule.negate
    return result
