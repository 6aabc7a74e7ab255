"""``Settings``: the resolved configuration of one invocation, every section typed.

``data`` is the merged TOML (what ``kbctl config show`` prints, and where profiles are resolved
from); everything else reads the typed sections (``settings.server.url``, ``settings.audit.enabled``),
built and checked once, when the settings are made. Nothing outside ``kbctl.config`` reads ``data``
(tests/unit/test_settings_typed.py keeps it so).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from .profile import Profile
from .sections import (
    AccessSettings,
    AgentSettings,
    AuditSettings,
    CacheSettings,
    DatabaseSettings,
    DefaultsSettings,
    ExtractSettings,
    FetchSettings,
    ModelsSettings,
    NamespaceSettings,
    ServerSettings,
    TelemetrySettings,
)
from .tables import merge, part, set_dotted, suggest

__all__ = ["Settings", "SECTIONS", "redact"]

#: The tables with a fixed set of keys, and their classes (the profiles, namespaces and agents aside).
SECTIONS: dict[str, type] = {
    "database": DatabaseSettings,
    "models": ModelsSettings,
    "defaults": DefaultsSettings,
    "fetch": FetchSettings,
    "audit": AuditSettings,
    "extract": ExtractSettings,
    "server": ServerSettings,
    "telemetry": TelemetrySettings,
    "cache": CacheSettings,
}

_WHERE = "settings"  # where a value set by an environment variable or a flag is wrong


@dataclass(frozen=True)
class Settings:
    """The resolved configuration of one invocation: the merged tables and their typed sections."""

    data: Mapping[str, Any]
    sources: tuple[str, ...] = ()
    database: DatabaseSettings = field(init=False, repr=False, compare=False)
    models: ModelsSettings = field(init=False, repr=False, compare=False)
    defaults: DefaultsSettings = field(init=False, repr=False, compare=False)
    fetch: FetchSettings = field(init=False, repr=False, compare=False)
    audit: AuditSettings = field(init=False, repr=False, compare=False)
    extract: ExtractSettings = field(init=False, repr=False, compare=False)
    server: ServerSettings = field(init=False, repr=False, compare=False)
    telemetry: TelemetrySettings = field(init=False, repr=False, compare=False)
    cache: CacheSettings = field(init=False, repr=False, compare=False)
    namespaces: Mapping[str, NamespaceSettings] = field(init=False, repr=False, compare=False)
    agents: Mapping[str, AgentSettings] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, cls in SECTIONS.items():
            object.__setattr__(self, name, part(cls, _WHERE, name, self.data.get(name)))
        namespaces = _tables(self.data, "namespaces")
        object.__setattr__(
            self,
            "namespaces",
            {n: NamespaceSettings.from_table(_WHERE, f"namespaces.{n}", t) for n, t in namespaces.items()},
        )
        agents = _tables(self.data, "agents")
        object.__setattr__(
            self,
            "agents",
            {n: AgentSettings.from_table(_WHERE, f"agents.{n}", t, self.server) for n, t in agents.items()},
        )

    @property
    def dsn(self) -> str:
        """The DSN: ``database.dsn``, else the environment variable ``database.dsn_env`` names, else ""."""
        db = self.database
        if db.dsn:
            return db.dsn
        if db.dsn_env:
            return os.environ.get(db.dsn_env, "")
        return ""

    @property
    def home(self) -> Path:
        """``database.home``, else the user's data directory (``~/.local/share/kbctl`` on Linux)."""
        if self.database.home:
            return Path(self.database.home).expanduser().resolve()
        import platformdirs

        return Path(platformdirs.user_data_dir("kbctl")).resolve()

    @property
    def model_cache(self) -> Path:
        """Where exported models and ``precision = "auto"`` decisions live: ``models.cache_dir``, else ``<home>/models``."""
        d = self.models.cache_dir
        return Path(d).expanduser().resolve() if d else self.home / "models"

    @property
    def tenant(self) -> str:
        return self.defaults.tenant

    def profile(self, name: str | None = None, *, embedder: bool = True) -> Profile:
        """Resolve a named profile (default: ``defaults.profile``); ``embedder=False`` does not ask
        whether its embedder is installed here."""
        name = name or self.defaults.profile
        profiles = self.data.get("profiles", {})
        if name not in profiles:
            raise ConfigError(
                f"unknown profile {name!r}", hint=suggest(name, profiles) or f"known: {', '.join(profiles)}"
            )
        merged = merge(copy.deepcopy(dict(self.data["profile"])), profiles[name])
        return dataclasses.replace(Profile.from_table(name, merged, embedder=embedder), cache_dir=str(self.model_cache))

    def profile_names(self) -> list[str]:
        return list(self.data.get("profiles", {}))

    def namespace_profile(self, namespace: str) -> str | None:
        """The profile a namespace is declared with in the config, if any."""
        ns = self.namespaces.get(namespace)
        return ns.profile if ns and ns.profile else None

    def namespace_acl(self, namespace: str) -> AccessSettings:
        """A namespace's access settings (``kbctl.acl``): its ACL default, path rules, recipients flag."""
        ns = self.namespaces.get(namespace)
        return ns.access if ns else AccessSettings()

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """These settings with ``overrides`` (dotted keys, as ``load_settings``'s) set, checked again."""
        data = copy.deepcopy(dict(self.data))
        for dotted, value in overrides.items():
            if value is not None:
                set_dotted(data, dotted, value)
        return Settings(data=data, sources=self.sources)

    def as_dict(self) -> dict[str, Any]:
        """Every setting after every layer, as nested tables (a copy: run reports)."""
        return copy.deepcopy(dict(self.data))

    def redacted(self) -> dict[str, Any]:
        """``as_dict()`` with the passwords of ``database.dsn``, ``server.url`` and
        ``telemetry.endpoint`` replaced by ``***`` (what ``kbctl config show`` prints)."""
        data = self.as_dict()
        for section, key in _SECRET_KEYS:
            table = data.get(section)
            if isinstance(table, dict) and isinstance(table.get(key), str):
                table[key] = redact(table[key])
        return data


_SECRET_KEYS = (("database", "dsn"), ("server", "url"), ("telemetry", "endpoint"))
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^/?#]*)(?P<rest>.*)$", re.DOTALL)
_PASSWORD = re.compile(r"(?P<head>(?:^|[\s?&;])password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&;]*)", re.IGNORECASE)


def redact(value: str) -> str:
    """A connection string or URL with its password, if it holds one, replaced by ``***``: the
    ``user:password@`` of a URL, and a ``password=`` of a URL's query or of a ``key=value`` DSN."""
    m = _URL.match(value)
    if m and "@" in m["authority"]:
        userinfo, host = m["authority"].rsplit("@", 1)  # a password may hold an unescaped @
        if ":" in userinfo:
            value = f"{m['scheme']}{userinfo.split(':', 1)[0]}:***@{host}{m['rest']}"
    return _PASSWORD.sub(r"\g<head>***", value)


def _tables(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    tables = data.get(name) or {}
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{_WHERE}: [{name}] must be a table")
    return tables
