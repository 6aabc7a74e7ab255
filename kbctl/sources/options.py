"""Options of the fetch stage (and, from ``kbctl.mediatypes``, the guessing of media types)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping

from ..config import FetchSettings
from ..errors import ConfigError
from ..mediatypes import SUFFIXES, guess_media_type

__all__ = ["FetchOptions", "DEFAULT_SUFFIXES", "normalise_suffixes", "guess_media_type", "default_user_agent"]

MB = 1024 * 1024

#: Suffixes the extract stage can read; files with other suffixes are skipped when walking a folder.
DEFAULT_SUFFIXES: frozenset[str] = SUFFIXES


def default_user_agent() -> str:
    """``kbctl/<version> (+https://github.com/kbctl/kbctl)``."""
    from .._version import __version__

    return f"kbctl/{__version__} (+https://github.com/kbctl/kbctl)"


@dataclass(frozen=True)
class FetchOptions:
    """How to fetch. Every field has a default, so ``FetchOptions()`` is the normal case.

    Files: ``max_file_bytes`` caps one file (or stdin); ``suffixes`` are the extractable suffixes
    taken when walking folders (``None`` = ``DEFAULT_SUFFIXES``); hidden names (``.x``) are skipped
    unless ``include_hidden``. ``stdin_name`` names what comes on stdin (its uri becomes
    ``stdin:<name>`` and its media type is guessed from the name).

    URLs: ``timeout`` per request in seconds, ``max_bytes`` caps one response body (as sent, and
    once decompressed). A request that fails with a connection error, a body cut short (or stalled
    or reset midway), a timeout, 429 or 5xx is retried ``retries`` times (so at most
    ``retries + 1`` tries), waiting ``backoff_base * backoff_factor ** n`` seconds plus up to
    ``backoff_jitter`` of that at random, or the server's ``Retry-After``; one longer than
    ``retry_after_cap`` fails the URL at once (a retry before then would be refused again). Feeds: entries whose content is shorter than ``summary_chars`` count as
    summary-only for ``follow_links``.

    Policy (see ``kbctl.sources.policy``): one try of a request (its redirects included) may take
    ``deadline`` seconds in all, and once ``min_rate_grace`` seconds have passed since an answer's
    first byte it must have come at ``min_rate`` bytes/s on average (0 turns the check off).
    Addresses that are not public (loopback, private, link-local, multicast, reserved) are refused
    unless ``allow_private``, or unless ``allow_hosts`` names the host, its address or a network
    holding it (``"wiki.internal"``, ``"127.0.0.1"``, ``"10.0.0.0/8"``). A folder walk skips (and
    records) symlinks that lead out of the folder unless ``follow_symlinks``.
    """

    timeout: float = 20.0
    max_bytes: int = 20 * MB
    max_file_bytes: int = 50 * MB
    retries: int = 3
    backoff_base: float = 0.5
    backoff_factor: float = 2.0
    backoff_jitter: float = 0.25
    retry_after_cap: float = 60.0
    user_agent: str = field(default_factory=default_user_agent)
    suffixes: Collection[str] | None = None
    include_hidden: bool = False
    stdin_name: str | None = None
    summary_chars: int = 500
    deadline: float = 60.0
    min_rate: float = 1024.0
    min_rate_grace: float = 10.0
    allow_private: bool = False
    allow_hosts: tuple[str, ...] = ()
    follow_symlinks: bool = False

    @classmethod
    def from_config(cls, table: FetchSettings | Mapping[str, Any], **overrides: Any) -> FetchOptions:
        """Options from the ``[fetch]`` settings (or a table of some of their keys), then ``overrides``
        (``ConfigError`` for a value out of range or an ``allow_hosts`` entry that is neither a host
        nor a network)."""
        from .policy import parse_allow_hosts

        if isinstance(table, FetchSettings):
            table = dataclasses.asdict(table)
        values = {k: _CONFIG_KEYS[k](v) for k, v in table.items() if k in _CONFIG_KEYS}
        for key in ("timeout", "deadline"):
            if key in values and values[key] <= 0:
                raise ConfigError(f"fetch.{key} must be more than 0 seconds, not {values[key]:g}")
        for key in ("min_rate", "min_rate_grace", "max_bytes", "max_file_bytes", "retries"):
            if key in values and values[key] < 0:
                raise ConfigError(f"fetch.{key} must not be negative, not {values[key]:g}")
        parse_allow_hosts(values.get("allow_hosts", ()))
        return cls(**{**values, **overrides})

    @property
    def extractable(self) -> frozenset[str]:
        """The suffixes to take when walking folders, lower-cased with their leading dot."""
        return normalise_suffixes(self.suffixes)


#: The keys of the ``[fetch]`` table and how each becomes a ``FetchOptions`` field.
_CONFIG_KEYS: dict[str, Callable[[Any], Any]] = {
    "timeout": float,
    "deadline": float,
    "min_rate": float,
    "min_rate_grace": float,
    "max_bytes": int,
    "max_file_bytes": int,
    "retries": int,
    "allow_private": bool,
    "allow_hosts": lambda hosts: tuple(str(h) for h in hosts),
}


def normalise_suffixes(suffixes: Collection[str] | None) -> frozenset[str]:
    """Suffixes lower-cased with a leading dot (``"MD"`` → ``".md"``); ``None`` → ``DEFAULT_SUFFIXES``."""
    if suffixes is None:
        return DEFAULT_SUFFIXES
    return frozenset(s.lower() if s.startswith(".") else "." + s.lower() for s in suffixes)
