"""Layered TOML configuration and embedding profiles.

Layers, lowest first: the packaged ``default.toml`` < the user file (``./kbctl.toml`` or an explicit
path) < ``KBCTL_*`` environment variables < explicit overrides (command-line flags). Every key must
exist in the packaged defaults; an unknown key is a ``ConfigError`` that suggests the closest one.

Modules: ``loading`` (the layers, ``load_settings``; ``check_settings`` for ``kbctl config check``), ``settings`` (``Settings``, its typed
sections), ``sections`` (``[database]``, ``[server]``, ``[fetch]``, ``[audit]``, ``[namespaces.*]``,
``[agents.*]``…), ``profile`` (``Profile`` and its parts), ``tables`` (the checks they share).
Light on purpose: the CLI's fast path (``kbctl.cli.fast``) imports it before anything heavy.
"""

from __future__ import annotations

from .loading import ENV_KEYS, ConfigCheck, check_settings, default_config_path, load_settings
from .profile import (
    CHUNK_STRATEGIES,
    FINGERPRINT_KEYS,
    FUSIONS,
    PRF_MODES,
    RERANK_KINDS,
    SEARCH_MODES,
    ChunkSettings,
    HnswSettings,
    LexicalSettings,
    Profile,
    RerankSettings,
    SearchSettings,
)
from .sections import (
    ACL_DEFAULTS,
    ACL_ENTRY,
    AGENT_KEYS,
    AGENT_TOOLS,
    NAMESPACE_KEYS,
    AccessSettings,
    AgentSettings,
    AuditSettings,
    DatabaseSettings,
    DefaultsSettings,
    ExtractSettings,
    FetchSettings,
    ModelsSettings,
    NamespaceSettings,
    ServerSettings,
)
from .settings import SECTIONS, Settings

__all__ = [
    "Settings",
    "ConfigCheck",
    "check_settings",
    "AccessSettings",
    "Profile",
    "ChunkSettings",
    "HnswSettings",
    "LexicalSettings",
    "SearchSettings",
    "RerankSettings",
    "DatabaseSettings",
    "ModelsSettings",
    "DefaultsSettings",
    "FetchSettings",
    "AuditSettings",
    "ExtractSettings",
    "ServerSettings",
    "NamespaceSettings",
    "AgentSettings",
    "load_settings",
    "default_config_path",
    "FINGERPRINT_KEYS",
    # the value lists the checks use (tests and the search modules compare theirs with them)
    "ENV_KEYS",
    "SECTIONS",
    "CHUNK_STRATEGIES",
    "SEARCH_MODES",
    "FUSIONS",
    "PRF_MODES",
    "RERANK_KINDS",
    "ACL_DEFAULTS",
    "ACL_ENTRY",
    "AGENT_KEYS",
    "AGENT_TOOLS",
    "NAMESPACE_KEYS",
]
