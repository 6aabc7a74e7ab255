from __future__ import annotations

import pytest

from kbctl.config import load_settings
from kbctl.errors import ConfigError


def _user(tmp_path, text):
    p = tmp_path / "kbctl.toml"
    p.write_text(text)
    return p


def test_layers_defaults_user_env_flags(tmp_path):
    p = _user(tmp_path, '[defaults]\ntenant = "from_file"\n[database]\nhome = "/from/file"\n')
    s = load_settings(p, env={})
    assert s.tenant == "from_file"
    s = load_settings(p, env={"KBCTL_TENANT": "from_env"})
    assert s.tenant == "from_env"
    s = load_settings(p, {"defaults.tenant": "from_flag"}, env={"KBCTL_TENANT": "from_env"})
    assert s.tenant == "from_flag"
    assert str(s.home) == "/from/file"


def test_unknown_key_suggests_the_close_one(tmp_path):
    p = _user(tmp_path, "[database]\nkeep_runing = false\n")
    with pytest.raises(ConfigError) as e:
        load_settings(p, env={})
    assert "database.keep_runing" in e.value.message and "keep_running" in e.value.hint


def test_unknown_profile_key_and_bad_type(tmp_path):
    with pytest.raises(ConfigError, match="profiles.mine.dimensoin"):
        load_settings(_user(tmp_path, "[profiles.mine]\ndimensoin = 3\n"), env={})
    with pytest.raises(ConfigError, match="must be int"):
        load_settings(_user(tmp_path, '[profiles.mine]\ndimension = "big"\n'), env={})


def test_user_profile_overrides_shared_settings(tmp_path):
    s = load_settings(
        _user(
            tmp_path,
            '[profiles.small]\nembedder = "hash"\nmodel = "h"\ndimension = 64\n[profiles.small.chunk]\nsize = 100\n',
        ),
        env={},
    )
    p = s.profile("small")
    assert (p.dimension, p.chunk.size, p.chunk.overlap) == (64, 100, 32)
    assert p.fingerprint != s.profile("hash-384").fingerprint


def test_fingerprint_ignores_precision_and_batch_but_not_model(tmp_path):
    base = load_settings(env={}).profile("minilm")
    s = load_settings(_user(tmp_path, '[profiles.minilm]\nprecision = "bf16"\nbatch_size = 8\n'), env={})
    assert s.profile("minilm").fingerprint == base.fingerprint
    s = load_settings(_user(tmp_path, '[profiles.minilm]\nmodel = "other"\n'), env={})
    assert s.profile("minilm").fingerprint != base.fingerprint


def test_chunk_size_over_model_limit_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="exceeds max_tokens"):  # when the file is loaded, used or not
        load_settings(_user(tmp_path, "[profiles.big.chunk]\nsize = 400\n"), env={})


def test_unknown_profile(tmp_path):
    with pytest.raises(ConfigError, match="unknown profile"):
        load_settings(env={}).profile("minilmm")


def test_a_profile_named_when_opening_must_exist(tmp_path):
    """``kbctl.open(profile="e5-smal")`` (or ``kbctl -p e5-smal search …``) was accepted: a search of
    a pinned namespace answered with the pin, so the typo went unseen until an ingest into a new
    namespace. Naming a profile that no configuration defines is a ConfigError at once."""
    import kbctl
    from tests.conftest import run_kbctl

    with pytest.raises(ConfigError, match="unknown profile 'e5-smal'") as e:
        kbctl.open(home=tmp_path / "home", profile="e5-smal")
    assert "e5-small" in (e.value.hint or "")
    r = run_kbctl(["--home", str(tmp_path / "home"), "-p", "e5-smal", "namespaces"])
    assert r.returncode == 2 and b"unknown profile 'e5-smal'" in r.stderr, r.stderr
    assert not (tmp_path / "home").exists()  # refused before any server was started
