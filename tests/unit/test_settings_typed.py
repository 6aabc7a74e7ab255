"""Settings are typed to the last key: every section is a checked frozen dataclass, and nothing
outside ``kbctl/config/`` reads the raw merged tables (``settings.data``)."""

from __future__ import annotations

import ast
import dataclasses
import tomllib
from pathlib import Path

import pytest

from kbctl.config import (
    SECTIONS,
    AgentSettings,
    AuditSettings,
    NamespaceSettings,
    ServerSettings,
    default_config_path,
    load_settings,
)
from kbctl.errors import ConfigError

KBCTL = Path(__file__).resolve().parents[2] / "kbctl"


def raw_reads(root: Path = KBCTL) -> list[str]:
    """``path:line`` of each ``<…settings>.data`` outside ``<root>/config/`` (``settings.data[...]``,
    ``self.settings.data.get(...)``, the dict passed on whole)."""
    out: list[tuple[str, int]] = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "config":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "data":
                owner = node.value
                name = (
                    owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
                )
                if name.endswith("settings"):
                    out.append((str(path.relative_to(root.parent)), node.lineno))
    return [f"{path}:{line}" for path, line in sorted(out)]


def test_nothing_outside_config_reads_the_raw_settings():
    offenders = raw_reads()
    assert not offenders, "read the typed section instead (settings.server.url, settings.audit…):\n" + "\n".join(
        offenders
    )


def test_the_scan_finds_raw_reads(tmp_path):
    """Not vacuous: subscripts, .get and the whole dict are found, in any module but kbctl/config/."""
    pkg = tmp_path / "kbctl"
    (pkg / "config").mkdir(parents=True)
    (pkg / "config" / "ok.py").write_text("x = settings.data['server']\n")
    (pkg / "api.py").write_text(
        "a = self.settings.data['audit']['enabled']\nb = settings.data.get('agents', {})\n"
        "c = kb.settings.data\nd = response.data\ne = self.settings.server.url\n"
    )
    assert raw_reads(pkg) == ["kbctl/api.py:1", "kbctl/api.py:2", "kbctl/api.py:3"]


def test_every_fixed_table_of_the_defaults_has_a_typed_section():
    """A table added to default.toml gets its class here (profiles, namespaces and agents are free-named)."""
    with open(default_config_path(), "rb") as f:
        defaults = tomllib.load(f)
    fixed = {k for k, v in defaults.items() if isinstance(v, dict)} - {"profile", "profiles", "namespaces", "agents"}
    assert fixed == set(SECTIONS)
    for name, cls in SECTIONS.items():
        assert {f.name for f in dataclasses.fields(cls)} == set(defaults[name]), name


def test_sections_hold_the_defaults_typed():
    s = load_settings(env={})
    assert s.audit == AuditSettings(enabled=False, retention_days=90)
    assert isinstance(s.server, ServerSettings) and s.server.port == 8765 and s.server.require_token is True
    assert s.server.evidence_min_similarity == 0.53 and s.fetch.allow_hosts == () and s.database.keep_running
    assert s.namespaces == {} and s.agents == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.server.port = 1  # type: ignore[misc]


def test_user_file_sections_are_typed(tmp_path):
    p = tmp_path / "kbctl.toml"
    p.write_text(
        '[server]\nport = 9000\n[fetch]\nallow_hosts = ["10.0.0.0/8"]\n'
        '[namespaces.hr]\nprofile = "hash-384"\nacl_default = "deny"\n'
        '[agents.bot]\nnamespaces = ["hr"]\nk = 4\n'
    )
    s = load_settings(p, env={})
    assert s.server.port == 9000 and s.fetch.allow_hosts == ("10.0.0.0/8",)
    assert s.namespaces["hr"] == NamespaceSettings(profile="hash-384", access=s.namespace_acl("hr"))
    assert s.namespace_acl("hr").default == "deny" and s.namespace_profile("hr") == "hash-384"
    assert s.agents["bot"] == AgentSettings(namespaces=("hr",), k=4)


def test_an_unknown_section_key_suggests_the_closest(tmp_path):
    p = tmp_path / "kbctl.toml"
    p.write_text("[server]\nprot = 9000\n")
    with pytest.raises(ConfigError, match="server.prot") as e:
        load_settings(p, env={})
    assert e.value.hint == "did you mean 'port'?"


def test_a_flag_or_variable_of_the_wrong_type_is_a_config_error():
    """Values set after the user file (flags, KBCTL_*, a caller's overrides) are checked too, once."""
    with pytest.raises(ConfigError, match="'server.port' must be int, got str"):
        load_settings(overrides={"server.port": "8766"}, env={})
    with pytest.raises(ConfigError, match="unknown key 'server.prot'"):
        load_settings(overrides={"server.prot": 1}, env={})
    with pytest.raises(ConfigError, match="server.workers must be >= 1"):
        load_settings(overrides={"server.workers": 0}, env={})


def test_with_overrides_makes_new_checked_settings():
    s = load_settings(env={})
    t = s.with_overrides({"defaults.tenant": "acme", "audit.enabled": True, "agents.bot": {}})
    assert (t.tenant, t.audit.enabled, set(t.agents)) == ("acme", True, {"bot"})
    assert (s.tenant, s.audit.enabled, set(s.agents)) == ("default", False, set())
    with pytest.raises(ConfigError, match="agents.bot.k"):
        s.with_overrides({"agents.bot": {"k": "four"}})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("server.header_timeout", 0, "server.header_timeout must be > 0"),
        ("server.body_timeout", -1, "server.body_timeout must be > 0"),
        ("server.keep_alive_timeout", 0, "server.keep_alive_timeout must be > 0"),
        ("server.max_connections", 0, "server.max_connections must be >= 1"),
        ("server.max_query_chars", 0, "server.max_query_chars must be >= 1"),
        ("server.max_k", 0, "server.max_k must be >= 1"),
        ("server.max_budget", -5, "server.max_budget must be >= 1"),
        ("server.max_body_bytes", 0, "server.max_body_bytes must be >= 1"),
        ("server.max_output_tokens", 0, "server.max_output_tokens must be >= 1"),
        ("server.drain_seconds", -1, "server.drain_seconds must be >= 0"),
        ("server.evidence_min_similarity", 1.5, r"server.evidence_min_similarity must be in -1..1"),
        ("server.evidence_min_terms", -0.1, r"server.evidence_min_terms must be in 0..1"),
        ("database.connect_timeout", -1, "database.connect_timeout must be >= 0"),
    ],
)
def test_every_server_and_database_limit_is_checked_when_the_settings_load(key, value, message):
    """A limit that cannot work (a zero timeout, k of at most 0, a threshold no passage can reach)
    is refused by name when the settings load, not when a server starts or a request arrives."""
    with pytest.raises(ConfigError, match=message):
        load_settings(overrides={key: value}, env={})
