"""The sections of the settings besides the profiles, each a frozen dataclass checked when loaded.

``[database]``, ``[models]``, ``[defaults]``, ``[fetch]``, ``[audit]``, ``[server]``, ``[telemetry]`` and ``[cache]`` have a fixed
set of keys (those of the packaged ``default.toml``); ``[namespaces.NAME]`` and ``[agents.NAME]``
are free-named tables of the keys in ``NAMESPACE_KEYS`` and ``AGENT_KEYS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from .. import validate
from ..errors import ConfigError, KbctlError
from ..types import Principal
from .tables import check_positive, check_range, one_of, suggest

__all__ = [
    "DatabaseSettings",
    "ModelsSettings",
    "DefaultsSettings",
    "FetchSettings",
    "AuditSettings",
    "ExtractSettings",
    "ServerSettings",
    "TelemetrySettings",
    "CacheSettings",
    "NamespaceSettings",
    "AccessSettings",
    "AgentSettings",
    "NAMESPACE_KEYS",
    "AGENT_KEYS",
    "AGENT_TOOLS",
    "ACL_DEFAULTS",
    "ACL_ENTRY",
]


@dataclass(frozen=True)
class DatabaseSettings:
    """``[database]``: the DSN (or the embedded server's home), and how a command connects."""

    dsn: str
    dsn_env: str
    home: str
    keep_running: bool
    auto_migrate: bool
    connect_timeout: int
    handle_threads: int  # threads one handle serves at once (``kbctl.api.session``)

    def _check(self, where: str) -> None:
        check_range(where, "database.connect_timeout", self.connect_timeout, 0)  # 0: wait as long as it takes (libpq)
        check_range(where, "database.handle_threads", self.handle_threads, 1)


@dataclass(frozen=True)
class ModelsSettings:
    """``[models]``: where exported models and ``precision = "auto"`` decisions are kept."""

    cache_dir: str

    def _check(self, where: str) -> None:
        pass


@dataclass(frozen=True)
class DefaultsSettings:
    """``[defaults]``: the tenant of every namespace name, and the profile of a new namespace."""

    tenant: str
    profile: str

    def _check(self, where: str) -> None:
        pass


@dataclass(frozen=True)
class FetchSettings:
    """``[fetch]``: how files and URLs are read (``kbctl.sources.options.FetchOptions.from_config``
    checks the values' ranges and the ``allow_hosts`` entries)."""

    timeout: float
    retries: int
    deadline: float
    min_rate: float
    min_rate_grace: float
    max_bytes: int
    max_file_bytes: int
    allow_private: bool
    allow_hosts: tuple[str, ...]

    def _check(self, where: str) -> None:
        pass


@dataclass(frozen=True)
class AuditSettings:
    """``[audit]``: the log of searches made as a principal, and how long its rows are kept."""

    enabled: bool
    retention_days: int

    def _check(self, where: str) -> None:
        check_range(where, "audit.retention_days", self.retention_days, 0)


@dataclass(frozen=True)
class ExtractSettings:
    """``[extract]``: OCR of PDF pages without text, and PDF tables (``kbctl.extract.options``)."""

    ocr: str
    ocr_min_confidence: float
    ocr_dpi: int
    tables: bool

    def _check(self, where: str) -> None:
        one_of(where, "extract.ocr", self.ocr, ("auto", "off"))
        check_range(where, "extract.ocr_min_confidence", self.ocr_min_confidence, 0, 1)
        check_range(where, "extract.ocr_dpi", self.ocr_dpi, 50, 600)


@dataclass(frozen=True)
class ServerSettings:
    """``[server]``: the agent surface (``kbctl serve``, ``kbctl mcp``) and the server ``kbctl search`` asks."""

    url: str
    token_env: str
    host: str
    port: int
    workers: int
    require_token: bool
    allowed_hosts: tuple[str, ...]
    metrics_open: bool
    header_timeout: float
    body_timeout: float
    keep_alive_timeout: float
    max_connections: int
    max_query_chars: int
    max_k: int
    max_budget: int
    max_body_bytes: int
    max_output_tokens: int
    drain_seconds: int
    log_queries: bool
    evidence_min_similarity: float
    evidence_min_terms: float

    def _check(self, where: str) -> None:
        if self.url.strip():
            _check_url(
                where,
                "server.url",
                self.url,
                "the address of a running kbctl serve: http://HOST:PORT (http://127.0.0.1:8765)",
            )
        check_range(where, "server.port", self.port, 0, 65535)
        check_range(where, "server.workers", self.workers, 1)
        for key in ("header_timeout", "body_timeout", "keep_alive_timeout"):
            check_positive(where, f"server.{key}", getattr(self, key))
        for key in ("max_connections", "max_query_chars", "max_k", "max_budget", "max_body_bytes", "max_output_tokens"):
            check_range(where, f"server.{key}", getattr(self, key), 1)
        check_range(where, "server.drain_seconds", self.drain_seconds, 0)
        check_range(where, "server.evidence_min_similarity", self.evidence_min_similarity, -1, 1)
        check_range(where, "server.evidence_min_terms", self.evidence_min_terms, 0, 1)


def _check_url(where: str, key: str, url: str, what: str) -> None:
    """An http(s) URL with a host (``[server] url``, ``[telemetry] endpoint``). Anything else failed
    at its first use: a urllib traceback in ``kbctl search``, an exporter's error after every
    command; ``localhost:8765`` even parses, with the scheme ``localhost``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # a port that is not a number or out of range, a bracketed host that is not one
        ok = False
    if not ok:
        shown = re.sub(r"//[^/@]*@", "//***@", url)  # never a password in the message
        raise ConfigError(
            f"{where}: {key} must be an http:// or https:// URL with a host, got {shown!r}",
            hint=f"{what}, or empty for none",
            key=key,
        )


@dataclass(frozen=True)
class TelemetrySettings:
    """``[telemetry]``: OpenTelemetry traces (``kbctl.telemetry``, docs/telemetry.md)."""

    enabled: bool
    exporter: str
    endpoint: str
    service_name: str
    record_query: bool

    def _check(self, where: str) -> None:
        one_of(where, "telemetry.exporter", self.exporter, ("otlp", "console"))
        if self.endpoint.strip():
            _check_url(where, "telemetry.endpoint", self.endpoint, "an OTLP/HTTP collector: http://HOST:4318")


@dataclass(frozen=True)
class CacheSettings:
    """``[cache]``: memory one process keeps for the packed lexical segments (``kbctl.search.memory``)."""

    forward_mb: int
    segments_mb: int
    term_rows_mb: int

    def _check(self, where: str) -> None:
        for key in ("forward_mb", "segments_mb", "term_rows_mb"):
            check_range(where, f"cache.{key}", getattr(self, key), 0)


ACL_DEFAULTS = ("public", "deny")
#: An ACL entry: public, user:<id> or group:<name> (ids without spaces or ':').
ACL_ENTRY = re.compile(r"public|(user|group):[^\s:]{1,256}")


@dataclass(frozen=True)
class AccessSettings:
    """Who may view a namespace's documents (``[namespaces.NAME]``; what they mean: ``kbctl.acl``).

    ``default``: ``public`` or ``deny`` for documents without an ACL; ``rules``: (glob, principals)
    pairs, the first whose glob matches a document's path or URI gives its ACL; ``from_recipients``:
    an e-mail's From, To and Cc may view it.
    """

    default: str = "public"
    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()
    from_recipients: bool = False

    @classmethod
    def from_table(cls, where: str, t: Mapping[str, Any], dotted: str = "") -> AccessSettings:
        """The settings of one ``[namespaces.NAME]`` table (``dotted``: its key, ``namespaces.NAME``); a
        malformed value is a ConfigError naming it (its ``key``: ``namespaces.NAME.acl_rules[i]``)."""
        default = t.get("acl_default", "public")
        one_of(where, "acl_default", default, ACL_DEFAULTS)
        rules = []
        for i, r in enumerate(t.get("acl_rules", [])):
            glob, principals = (r.get("glob"), r.get("principals")) if isinstance(r, dict) else (None, None)
            if (
                not isinstance(glob, str)
                or not glob
                or not isinstance(principals, list)
                or set(r) - {"glob", "principals"}
                or not all(isinstance(p, str) and ACL_ENTRY.fullmatch(p) for p in principals)
            ):
                raise ConfigError(
                    f'{where}.acl_rules[{i}] must be {{glob = "…", principals = ["group:…", "user:…"]}}',
                    hint="principals are public, user:<id> or group:<name>",
                    key=f"{dotted}.acl_rules[{i}]" if dotted else None,
                )
            rules.append((glob, tuple(principals)))
        return cls(default, tuple(rules), bool(t.get("acl_from_recipients", False)))


NAMESPACE_KEYS: dict[str, type] = {
    "profile": str,
    "tenant": str,
    "description": str,
    "acl_default": str,
    "acl_rules": list,
    "acl_from_recipients": bool,
}

_TYPE_NAMES = {str: "string", list: "list", bool: "boolean", int: "whole number"}


@dataclass(frozen=True)
class NamespaceSettings:
    """``[namespaces.NAME]``: the profile and tenant a namespace is declared with, and its access."""

    profile: str = ""
    tenant: str = ""
    description: str = ""
    access: AccessSettings = AccessSettings()

    @classmethod
    def from_table(cls, where: str, dotted: str, value: Any) -> NamespaceSettings:
        """The namespace table ``dotted`` (``namespaces.NAME``) of ``where``; a ConfigError naming what is wrong."""
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [{dotted}] must be a table", key=dotted)
        for k, v in value.items():
            if k not in NAMESPACE_KEYS:
                raise ConfigError(
                    f"{where}: unknown key '{dotted}.{k}'", hint=suggest(k, NAMESPACE_KEYS), key=f"{dotted}.{k}"
                )
            if not isinstance(v, NAMESPACE_KEYS[k]):
                raise ConfigError(
                    f"{where}: '{dotted}.{k}' must be a {_TYPE_NAMES[NAMESPACE_KEYS[k]]}", key=f"{dotted}.{k}"
                )
        access = AccessSettings.from_table(
            f"{where}: {dotted}", value, dotted
        )  # acl_default and acl_rules, checked now
        return cls(value.get("profile", ""), value.get("tenant", ""), value.get("description", ""), access)


# ``[agents.NAME]``: what an agent reaching kbctl through ``kbctl mcp`` / ``kbctl serve`` may use
# (``kbctl.server.agents``): its namespaces and tools (empty: all), default k and token budget
# (0: the server's), the tenant it searches (empty: the server's) and who it searches as.
AGENT_TOOLS = (
    "search_knowledge",
    "verify_claim",
    "research_topic",
    "get_document",
    "list_namespaces",
    "record_feedback",
)

AGENT_KEYS: dict[str, type] = {
    "namespaces": list,
    "tools": list,
    "k": int,
    "budget": int,
    "tenant": str,
    "principal": str,
    "groups": list,
    "description": str,
}


@dataclass(frozen=True)
class AgentSettings:
    """``[agents.NAME]`` as written (``kbctl.server.agents`` resolves it to an ``Agent``): empty or 0 is absent."""

    namespaces: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    k: int = 0
    budget: int = 0
    tenant: str = ""
    principal: str = ""
    groups: tuple[str, ...] = ()
    description: str = ""

    @classmethod
    def from_table(cls, where: str, dotted: str, value: Any, server: ServerSettings | None = None) -> AgentSettings:
        """The agent table ``dotted`` (``agents.NAME``) of ``where``; a ConfigError naming what is
        wrong. With ``server`` (the merged settings'), its values too, within the server's limits."""
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [{dotted}] must be a table", key=dotted)
        for k, v in value.items():
            if k not in AGENT_KEYS:
                raise ConfigError(
                    f"{where}: unknown key '{dotted}.{k}'", hint=suggest(k, AGENT_KEYS), key=f"{dotted}.{k}"
                )
            want = AGENT_KEYS[k]
            if (
                not isinstance(v, want)
                or (want is int and isinstance(v, bool))
                or (isinstance(v, list) and not all(isinstance(x, str) for x in v))
            ):
                raise ConfigError(
                    f"{where}: '{dotted}.{k}' must be a {_TYPE_NAMES[want]}{' of strings' if want is list else ''}",
                    key=f"{dotted}.{k}",
                )
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
        agent = cls(**values)
        if server is not None:
            agent._check(where, dotted, server)
        return agent

    def _check(self, where: str, dotted: str, server: ServerSettings) -> None:
        """What the server would refuse on every request of the agent, refused when the file is read."""
        unknown = [t for t in self.tools if t not in AGENT_TOOLS]
        if unknown:
            raise ConfigError(
                f"{where}: {dotted}.tools: unknown tool {unknown[0]!r}",
                hint=f"tools: {', '.join(AGENT_TOOLS)}",
                key=f"{dotted}.tools",
            )
        for key, value, most, limit in (
            ("k", self.k, server.max_k, "max_k"),
            ("budget", self.budget, server.max_budget, "max_budget"),
        ):
            if not 0 <= value <= most:
                raise ConfigError(
                    f"{where}: {dotted}.{key} must be in 0..{most}, got {value}",
                    hint=f"0 (or no {key}): the default; at most [server] {limit} ({most})",
                    key=f"{dotted}.{key}",
                )
        try:
            Principal.parse(self.principal or None, self.groups)
        except ValueError as e:
            key = "principal" if self.principal and not _principal_ok(self.principal) else "groups"
            raise ConfigError(
                f"{where}: {dotted}.{key}: {e}",
                hint='principal = "user:ID" (or "ID"), groups = ["NAME", …] (or "group:NAME")',
                key=f"{dotted}.{key}",
            ) from None
        for key, names, kind in (
            ("tenant", (self.tenant,) if self.tenant else (), "tenant"),
            ("namespaces", self.namespaces, "namespace"),
        ):
            for name in names:
                try:
                    validate.name(kind, name)
                except KbctlError as e:
                    raise ConfigError(
                        f"{where}: {dotted}.{key}: {e.message}", hint=e.hint, key=f"{dotted}.{key}"
                    ) from None


def _principal_ok(principal: str) -> bool:
    try:
        Principal.parse(principal)
    except ValueError:
        return False
    return True
