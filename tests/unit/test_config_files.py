"""A user's config file as a team writes it: every mistake is one ConfigError naming the file, the
line where it can be found, the key, and a hint; each environment variable's mistake names it."""

from __future__ import annotations

import os

import pytest

from kbctl.config import load_settings
from kbctl.errors import ConfigError
from tests.conftest import run_kbctl


def _user(tmp_path, text: str | bytes):
    p = tmp_path / "kbctl.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _error(path, env=None) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        load_settings(path, env=env or {})
    return e.value


def test_a_byte_order_mark_is_read_as_the_start_of_the_file(tmp_path):
    p = _user(tmp_path, b"\xef\xbb\xbf[profile.search]\nk = 5\n")
    assert load_settings(p, env={}).profile().search.k == 5


def test_a_syntax_error_names_the_file_and_its_line_with_a_hint(tmp_path):
    p = _user(tmp_path, "[profile.search]\nk = \n")
    e = _error(p)
    assert str(p) in e.message and "line 2" in e.message and e.hint


@pytest.mark.parametrize(
    ("text", "line"),
    [('[server]\nport = 8000\nhost = "127.0.0.1\n', 3), ("a = 1\nb = [1,\n\n\n", 2), ("k = {", 1)],
)
def test_a_syntax_error_at_the_end_of_the_file_names_its_last_line(tmp_path, text, line):
    """An unterminated string or array ran to the end of the file, where tomllib says "at end of
    document" with no line: the error named the file alone. It names the file's last line (the one
    with text), as FILE:LINE like every other error of a config file."""
    p = _user(tmp_path, text)
    e = _error(p)
    assert e.message.startswith(f"{p}:{line}: invalid TOML: "), e.message
    assert e.file == str(p) and e.line == line and e.hint


def test_an_unknown_key_names_its_line(tmp_path):
    p = _user(tmp_path, "# team settings\n[profile.chunk]\nszie = 100\n")
    e = _error(p)
    assert e.message.startswith(f"{p}:3: ") and "profile.chunk.szie" in e.message
    assert e.hint == "did you mean 'size'?"
    p = _user(tmp_path, "[profiles.x]\nembedder = 'hash'\n\n[profiles.x.serach]\nk = 5\n")
    e = _error(p)
    assert e.message.startswith(f"{p}:4: ") and "profiles.x.serach" in e.message and "'search'" in e.hint


@pytest.mark.parametrize(
    "text,key",
    [
        ("dimension = 384.5", "dimension"),
        ("dimension = 384.0", "dimension"),
        ("max_tokens = 300.9", "max_tokens"),
        ("batch_size = 8.0", "batch_size"),
    ],
)
def test_a_fraction_for_a_whole_number_of_a_profile_is_refused(tmp_path, text, key):
    """``dimension = 384.5`` was read as 384, silently."""
    p = _user(tmp_path, f'[profiles.x]\nembedder = "hash"\nmodel = "hash"\n{text}\n')
    e = _error(p)
    assert e.message.startswith(f"{p}:4: ") and key in e.message and "must be int, got float" in e.message


@pytest.mark.parametrize("value", [0, -5])
def test_batch_size_must_be_positive(tmp_path, value):
    p = _user(tmp_path, f"[profile]\nbatch_size = {value}\n")
    e = _error(p)
    assert e.message.startswith(f"{p}:2: ") and "batch_size must be >= 1" in e.message


def test_a_profile_not_in_use_is_checked_when_the_file_is_loaded(tmp_path):
    p = _user(tmp_path, '[profiles.small]\nembedder = "hash"\nmodel = "hash"\n[profiles.small.chunk]\nsize = 1\n')
    e = _error(p)
    assert e.message.startswith(f"{p}:5: ") and "profile 'small'" in e.message and "chunk.size" in e.message
    assert "200" in e.hint  # the default, as a value that holds


@pytest.mark.parametrize(
    "text,line,key",
    [
        ("[server]\nport = 70000\n", 2, "server.port"),
        ("[profile.search]\nk = 0\n", 2, "search.k"),
        ("[database]\n\nconnect_timeout = 2.5\n", 3, "database.connect_timeout"),
        ('[fetch]\nallow_hosts = ["a", 1]\n', 2, "fetch.allow_hosts"),
        ("[profile.hnsw]\nm = 1\n", 2, "hnsw.m"),
        ('[server]\n\nurl = "ftp://kb.internal"\n', 3, "server.url"),
        ('[telemetry]\nendpoint = "collector:4318"\n', 2, "telemetry.endpoint"),
    ],
)
def test_a_value_out_of_range_or_of_another_type_names_the_file_and_line(tmp_path, text, line, key):
    p = _user(tmp_path, text)
    e = _error(p)
    assert e.message.startswith(f"{p}:{line}: ") and key in e.message and e.hint


def test_an_unknown_default_profile_names_where_it_was_set(tmp_path):
    p = _user(tmp_path, '[defaults]\nprofile = "hash384"\n')
    e = _error(p)
    assert e.message.startswith(f"{p}:2: ") and "hash384" in e.message and e.hint == "did you mean 'hash-384'?"


def test_a_profile_of_a_plugin_not_installed_here_loads_and_fails_when_used(tmp_path):
    """A team file may name an embedder installed on some machines only: only its use is refused."""
    s = load_settings(_user(tmp_path, '[profiles.mine]\nembedder = "not-installed"\n'), env={})
    with pytest.raises(ConfigError, match="not-installed") as e:
        s.profile("mine")
    assert "kbctl.embedders" in e.value.hint, e.value.hint  # where a plugin registers its name


@pytest.mark.parametrize(
    ("name", "hint"),
    [("sentence-transformer", "did you mean 'sentence-transformers'?"), ("my-model", "kbctl.embedders")],
)
def test_an_unknown_embedder_hints_at_the_name_meant_or_the_plugin_to_install(tmp_path, name, hint):
    """``kbctl config check`` said 'hint: the default is "sentence-transformers"' for an embedder
    nobody registered: the packaged default, as if the key's value were out of range."""
    from kbctl.config.loading import check_settings

    p = _user(tmp_path, f'[profiles.mine]\nembedder = "{name}"\n')
    e = check_settings(p, env={}).error
    assert e is not None and e.message.startswith(f"{p}:2: ") and name in e.message, e
    assert hint in e.hint and "the default is" not in e.hint, e.hint


@pytest.mark.parametrize(
    "var,value,hint",
    [
        ("KBCTL_TENANT", "bad name", "letters, digits"),
        ("KBCTL_PROFILE", "hash384", "did you mean 'hash-384'?"),
        ("KBCTL_PROFILE", "", None),  # empty: not set
        ("KBCTL_SERVER", "notaurl", "http://HOST:PORT"),
        ("KBCTL_SERVER", "localhost:8765", "http://HOST:PORT"),  # no scheme: urllib read 'localhost' as one
        ("KBCTL_SERVER", "http://", "http://HOST:PORT"),
        ("KBCTL_SERVER", "http://127.0.0.1:port", "http://HOST:PORT"),
        ("KBCTL_SERVER", "", None),
        ("KBCTL_SERVER", "https://kb.internal/", None),
    ],
)
def test_an_environment_variable_s_bad_value_names_the_variable(var, value, hint):
    if hint is None:
        load_settings(env={var: value})
        return
    e = _error(None, env={var: value})
    assert e.message.startswith(f"{var}: ") and repr(value) in e.message and hint in (e.hint or "")


def test_a_directory_given_as_the_file_is_one_line_with_a_hint(tmp_path):
    e = _error(tmp_path)
    assert str(tmp_path) in e.message and "directory" in e.message and e.hint


def test_the_cli_reports_a_located_error_and_its_hint(tmp_path):
    cfg = _user(tmp_path, "[profile.search]\nk = 0\n")
    env = {k: None for k in os.environ if k.startswith("KBCTL_")} | {"KBCTL_HOME": str(tmp_path / "home")}
    r = run_kbctl(["--config", str(cfg), "config", "show"], env=env)
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and r.stdout == b""
    assert lines[0] == f"error: {cfg}:2: profile 'minilm': search.k must be >= 1, got 0", lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines


def _show(tmp_path, cfg, env=(), *args):
    env = {k: None for k in os.environ if k.startswith("KBCTL_")} | {"KBCTL_HOME": str(tmp_path / "home")} | dict(env)
    r = run_kbctl(["--config", str(cfg), "config", "show", *args], env=env)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def test_what_config_show_prints_loads_back_as_the_same_settings(tmp_path):
    cfg = _user(
        tmp_path,
        '[profiles."my model"]\nembedder = "hash"\nmodel = "hash"\nquery_prefix = "q😀: \\"x\\"\\t"\n'
        '[namespaces.billing]\nprofile = "my model"\nacl_rules = [{glob = "hr/**", principals = ["group:hr"]}]\n'
        '[agents.writer]\nk = 3\ngroups = ["support"]\n',
    )
    text = _show(tmp_path, cfg)
    again = tmp_path / "shown.toml"
    again.write_text(text)
    assert load_settings(again, env={}).as_dict() == load_settings(cfg, env={}).as_dict() | {
        "database": load_settings(again, env={}).as_dict()["database"]  # home: the test's KBCTL_HOME
    }
    assert load_settings(again, env={}).profile("my model").query_prefix == 'q😀: "x"\t'


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://kb:s3cret@db.internal:5432/kb",
        "postgresql://db.internal/kb?sslmode=require&password=s3cret",
        "host=db.internal user=kb password=s3cret dbname=kb",
        "host=db.internal password = 's3cret' dbname=kb",
    ],
)
def test_config_show_never_prints_a_password(tmp_path, dsn):
    cfg = _user(tmp_path, '[server]\nurl = "http://bot:s3cret@kb.internal:8765"\n')
    for args in ((), ("--json",)):
        out = _show(tmp_path, cfg, {"KBCTL_DSN": dsn}, *args)
        assert "s3cret" not in out and "db.internal" in out and "kb.internal" in out, out


@pytest.mark.parametrize(
    "text, line",
    [
        # an inline list, on one line and over several: the line of the entry, else of the key
        ('# team\n[namespaces.hr]\nacl_rules = [{glob = "hr/**", principals = ["hr"]}]\n', 3),
        (
            '[namespaces.hr]\nacl_default = "public"\nacl_rules = [\n  {glob = "a/**", principals = ["group:a"]},\n'
            '  {glob = "", principals = ["group:b"]},\n]\n',
            5,
        ),
        # an array of tables: the header of the entry
        (
            '[namespaces.hr]\n\n[[namespaces.hr.acl_rules]]\nglob = "a/**"\nprincipals = ["group:a"]\n\n'
            '[[namespaces.hr.acl_rules]]\nglob = "b/**"\nprincipals = ["nobody"]\n',
            7,
        ),
    ],
)
def test_a_bad_acl_rule_names_its_line(tmp_path, text, line):
    p = _user(tmp_path, text)
    e = _error(p)
    assert e.message.startswith(f"{p}:{line}: "), e.message
    assert "namespaces.hr.acl_rules[" in e.message and e.hint


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('tools = ["search_knowledge", "search"]', "agents.bot.tools"),
        ("k = -3", "agents.bot.k"),
        ("k = 500", "agents.bot.k"),  # above [server] max_k (100): every default search refused
        ("budget = -1", "agents.bot.budget"),
        ("budget = 20000", "agents.bot.budget"),  # above [server] max_budget (16000)
        ('principal = "group:hr"', "agents.bot.principal"),
        ('principal = "user:a b"', "agents.bot.principal"),
        ('groups = ["a b"]', "agents.bot.groups"),
        ('tenant = "Bad Name"', "agents.bot.tenant"),
        ('namespaces = ["no such"]', "agents.bot.namespaces"),
    ],
)
def test_an_agent_its_server_would_refuse_is_refused_when_the_file_is_read(tmp_path, body, key):
    """An agent table was checked for its keys and types only: a tool that does not exist, a
    principal that cannot be parsed, a k or budget the server refuses passed `kbctl config check`
    and `agents token create`, then every request of the agent failed (503 'authentication failed'
    for a tool or a principal, 400 'k must be at most 100' for a search without k, an empty answer
    for a negative budget)."""
    p = _user(tmp_path, f"# agents\n[agents.bot]\n{body}\n")
    e = _error(p)
    assert e.message.startswith(f"{p}:3: "), e.message
    assert key in e.message and e.hint, (e.message, e.hint)


def test_an_agent_within_the_servers_limits_loads(tmp_path):
    p = _user(
        tmp_path,
        '[server]\nmax_k = 20\n[agents.bot]\ntools = ["search_knowledge"]\nk = 20\nbudget = 16000\n'
        'principal = "bot-1"\ngroups = ["group:eng", "ops"]\ntenant = "acme"\nnamespaces = ["billing_kb"]\n',
    )
    bot = load_settings(p, env={}).agents["bot"]
    assert (bot.k, bot.budget, bot.tools, bot.principal) == (20, 16000, ("search_knowledge",), "bot-1")
