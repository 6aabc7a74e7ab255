"""The CLI is a thin skin over the library: a command parses options, makes one library call and
renders the result, so ``kbctl/cli/`` imports only the library's surface (``KnowledgeBase`` and the
types, errors and settings it hands out), never the store, search, pipeline or evaluation internals."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "kbctl" / "cli"

# What kbctl/cli may import from the library: the package (lazy public names), the API, and the
# values and errors its methods take and return.
# kbctl.server is the other adapter over kbctl.api: `kbctl serve`/`mcp` run it, and `kbctl search`
# forwards to a running one through its client (urllib only: the fast path asks it before kbctl.api).
ALLOWED = {
    "kbctl",
    "kbctl.api",
    "kbctl.errors",
    "kbctl.types",
    "kbctl.config",
    "kbctl._version",
    "kbctl.server",
    "kbctl.server.client",
}
CONTRACT = "The CLI imports only the library's surface (kbctl.api, errors, types, config) and the server it starts"


def _cli_imports() -> dict[str, set[str]]:
    """``cli module -> kbctl modules outside kbctl.cli it imports`` (in functions and under TYPE_CHECKING too)."""
    graph = grimp.build_graph("kbctl", cache_dir=None)
    return {
        m: {d for d in graph.find_modules_directly_imported_by(m) if not d.startswith("kbctl.cli")}
        for m in graph.find_children("kbctl.cli") | {"kbctl.cli"}
    }


def test_cli_modules_import_only_the_library_surface():
    offenders = {m: sorted(d) for m, deps in _cli_imports().items() if (d := deps - ALLOWED)}
    assert not offenders, f"kbctl/cli reaches past the library API (add a KnowledgeBase method): {offenders}"


def test_the_import_contract_forbids_every_other_kbctl_module():
    """pyproject's import-linter contract keeps up with new modules: each one outside ALLOWED is forbidden."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in config if c["name"] == CONTRACT]
    assert contract["source_modules"] == ["kbctl.cli"]
    top = {
        f"kbctl.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "kbctl").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    expected = top - ALLOWED - {"kbctl.cli", "kbctl.__main__"}
    listed = set(contract["forbidden_modules"])
    assert listed == expected, (
        f"add {sorted(expected - listed)} to the contract's forbidden_modules in pyproject.toml"
        f" (or to ALLOWED here, if the CLI may use it); drop {sorted(listed - expected)}"
    )


def test_no_command_opens_a_connection_or_reaches_into_the_database():
    """``kb.connection()``, ``kb.db`` and ``kb.session`` are for the library; a command that needs them needs a method."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("connection", "db", "session", "side_connection"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not found, found


def test_the_import_scan_sees_imports_inside_functions():
    """Not vacuous: the CLI imports the API lazily (inside ``State.kb``), and the scan finds it."""
    assert "kbctl.api" in _cli_imports()["kbctl.cli.state"]
