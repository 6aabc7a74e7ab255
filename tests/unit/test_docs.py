"""Documentation as code: what the CLI, the packaged config and the package tree offer is documented.

In the manner of datasette's and sqlite-utils' documentation tests: the checks walk what exists
(the click tree of ``kbctl``, the keys of ``configs/default.toml``, the modules under ``kbctl/``)
and report what the documents do not say. Each checker is also run against something added without
documentation, so a check that can no longer fail is noticed.

- every command, argument and option has help text; every command and option is named in README.md or docs/*.md
  (a command as ``kbctl GROUP COMMAND``, an option by one of its names: ``--namespace`` or ``-n``);
- every key of ``configs/default.toml`` is in README's configuration table, in the row of its table
  (a ``[profiles.NAME]`` key in the ``[profile]`` rows);
- README's Layout names every module under ``kbctl/``: a top-level module as ``name.py``, a
  package as ``name/`` followed by a parenthesis that names each of its modules (and nested
  packages the same way, inside it);
- every relative link of README.md and docs/*.md leads to a file that exists, and its ``#anchor``
  to a heading of that file (as GitHub makes a heading's anchor).
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in [README, *sorted((ROOT / "docs").glob("*.md"))])


def _section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a Markdown text."""
    m = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"README has no '## {heading}' section"
    return m.group(1)


# -- commands and options ----------------------------------------------------------------------------


# typer builds click commands (its own vendored copy of click): groups have ``commands``, options
# are the parameters whose ``param_type_name`` is "option".


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def undocumented_cli(root: Any, docs: str) -> list[str]:
    """One line per command or option without help text or without a mention in ``docs``."""
    problems = []
    for path, cmd in _commands(root):
        name = " ".join(("kbctl", *path))
        if not (cmd.help or cmd.short_help or "").strip():
            problems.append(f"{name}: no help text")
        if path and not re.search(rf"{re.escape(name)}(?![\w-])", docs):
            problems.append(f"{name}: not mentioned in README.md or docs/")
        for p in cmd.params:
            if p.param_type_name == "argument" and not (getattr(p, "help", None) or "").strip():
                problems.append(f"{name} {p.name.upper()}: no help text")
            if p.param_type_name != "option" or p.hidden:
                continue
            names = [*p.opts, *p.secondary_opts]
            label = f"{name} {'/'.join(o for o in names if o.startswith('--')) or '/'.join(names)}"
            if not (p.help or "").strip():
                problems.append(f"{label}: no help text")
            if not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", docs) for o in names):
                problems.append(f"{label}: not mentioned in README.md or docs/")
    return problems


def _cli() -> Any:
    from kbctl.cli.main import app

    return typer.main.get_command(app)


def _command(fn: Callable[..., None]) -> Any:
    """The click command typer builds for ``fn`` (as a command of kbctl's would be built)."""
    t = typer.Typer()
    t.command()(fn)
    return typer.main.get_command(t)


def test_every_command_and_option_has_help_and_is_documented():
    assert undocumented_cli(_cli(), _docs_text()) == []


def test_an_option_added_without_documentation_is_reported():
    def search(frobnicate_results: bool = typer.Option(False, "--frobnicate-results")) -> None:
        """Search, frobnicated."""

    root = copy.deepcopy(_cli())
    root.commands["search"].params += _command(search).params
    problems = undocumented_cli(root, _docs_text())
    assert "kbctl search --frobnicate-results: no help text" in problems
    assert "kbctl search --frobnicate-results: not mentioned in README.md or docs/" in problems


def test_a_command_added_without_documentation_is_reported():
    def defragment(table: str = typer.Argument(...), level: int = typer.Option(1, "--level", help="How hard.")) -> None:
        pass

    root = copy.deepcopy(_cli())
    root.commands["db"].add_command(_command(defragment), "defragment")
    problems = undocumented_cli(root, _docs_text())
    assert "kbctl db defragment: no help text" in problems
    assert "kbctl db defragment TABLE: no help text" in problems
    assert "kbctl db defragment: not mentioned in README.md or docs/" in problems
    assert "kbctl db defragment --level: not mentioned in README.md or docs/" in problems


# -- configuration keys --------------------------------------------------------------------------------


def _leaf_keys(table: dict, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _leaf_keys(value, (*path, key))
        else:
            yield (*path, key)


def config_table(readme: str) -> dict[str, set[str]]:
    """README's configuration table: table name (``database``, ``profile.chunk``…) → its keys.

    A row's first cell names its tables (```[profile]` / `[profiles.NAME]```); ```.chunk``` is a
    table inside the one of the last row that named a ``[table]``. Its keys are the backticked
    names of the second cell.
    """
    rows: dict[str, set[str]] = {}
    parent = ""
    for line in _section(readme, "Configuration").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2:
            continue
        labels = re.findall(r"`([^`]+)`", cells[0])
        keys = {k for k in re.findall(r"`([A-Za-z_][\w]*)`", "|".join(cells[1:]))}
        for label in labels:
            if label.startswith("["):
                name = label.strip("[]")
                parent = parent if name.startswith("profiles.") else name
                rows.setdefault(name, set()).update(keys)
            elif label.startswith("."):
                rows.setdefault(parent + label, set()).update(keys)
    return rows


def undocumented_config(defaults: dict, readme: str) -> list[str]:
    """Each key of ``defaults`` (a parsed default.toml) that its table's row does not list."""
    rows = config_table(readme)
    missing = []
    for path in _leaf_keys(defaults):
        table = list(path[:-1])
        if table[:1] == ["profiles"]:  # a named profile: the keys of [profile]
            table = ["profile", *table[2:]]
        if path[-1] not in rows.get(".".join(table), set()):
            missing.append(".".join(path))
    return missing


def _defaults() -> dict:
    return tomllib.loads((ROOT / "configs" / "default.toml").read_text(encoding="utf-8"))


def test_every_config_key_is_in_the_readme_configuration_table():
    assert undocumented_config(_defaults(), README.read_text(encoding="utf-8")) == []


def test_a_config_key_added_without_documentation_is_reported():
    defaults = _defaults()
    defaults["server"]["max_sessions"] = 10
    defaults["profile"]["chunk"]["min_size"] = 20
    defaults["profiles"]["hash-384"]["seed"] = 7
    missing = undocumented_config(defaults, README.read_text(encoding="utf-8"))
    assert {"profile.chunk.min_size", "server.max_sessions", "profiles.hash-384.seed"} <= set(missing)


# -- the Layout lists every module ---------------------------------------------------------------------


def _layout(readme: str) -> str:
    """The ``kbctl/`` part of the code block of README's Layout (up to the next top-level folder)."""
    block = re.search(r"```\n(.*?)```", _section(readme, "Layout"), re.S)
    assert block, "README's Layout has no code block"
    lines = block.group(1).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kbctl/"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1].strip()), len(lines))
    return "\n".join(lines[start:end])[len("kbctl/") :]


def _entry(text: str, package: str) -> str | None:
    """What the parenthesis after ``package/`` in ``text`` says (nested parentheses included), or None."""
    m = re.search(rf"(?<![\w/.]){re.escape(package)}/\s*\(", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[m.end() : i - 1]


def _modules(folder: Path) -> tuple[list[str], list[Path]]:
    """(module names, subpackage folders) directly in ``folder``."""
    mods = sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")
    pkgs = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    return mods, pkgs


def unlisted_modules(package: Path, layout: str) -> list[str]:
    """Modules and packages under ``package`` (``kbctl/``) that ``layout`` does not name."""
    missing = []
    mods, pkgs = _modules(package)
    for m in ["__init__", *mods]:
        if not re.search(rf"(?<![\w/]){re.escape(m)}\.py\b", layout):
            missing.append(f"{package.name}/{m}.py")

    def inside(folder: Path, text: str, prefix: str) -> None:
        entry = _entry(text, folder.name)
        if entry is None:
            missing.append(f"{prefix}{folder.name}/ (no parenthesis naming its modules)")
            return
        sub_mods, sub_pkgs = _modules(folder)
        for m in sub_mods:
            if not re.search(rf"(?<![\w/]){re.escape(m)}(?![\w/])", entry):
                missing.append(f"{prefix}{folder.name}/{m}.py")
        for sub in sub_pkgs:
            inside(sub, entry, f"{prefix}{folder.name}/")

    for pkg in pkgs:
        inside(pkg, layout, f"{package.name}/")
    return missing


def test_the_readme_layout_names_every_module():
    assert unlisted_modules(ROOT / "kbctl", _layout(README.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize(
    "new, reported",
    [
        ("kbctl/housekeeping.py", "kbctl/housekeeping.py"),
        ("kbctl/store/vacuuming.py", "kbctl/store/vacuuming.py"),
        ("kbctl/ledger/__init__.py", "kbctl/ledger/ (no parenthesis naming its modules)"),
    ],
)
def test_a_module_added_without_a_layout_entry_is_reported(tmp_path, new, reported):
    tree = tmp_path / "kbctl"
    for src in (ROOT / "kbctl").rglob("*.py"):
        dst = tree / src.relative_to(ROOT / "kbctl")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.touch()
    (tree / new.removeprefix("kbctl/")).parent.mkdir(parents=True, exist_ok=True)
    (tree / new.removeprefix("kbctl/")).touch()
    assert reported in unlisted_modules(tree, _layout(README.read_text(encoding="utf-8")))


# -- links and anchors -----------------------------------------------------------------------------


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (a link there is not a link)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown ``text``: lower case, punctuation other
    than ``-`` and ``_`` dropped, spaces as ``-``; a repeated one gets ``-1``, ``-2``…"""
    seen: dict[str, int] = {}
    anchors = set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def broken_links(files: dict[Path, str]) -> list[str]:
    """One line per relative link in ``files`` (path → its text) whose file does not exist, or
    whose ``#anchor`` is not a heading of the Markdown file it leads to."""
    problems = []
    for path, text in files.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(text)):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            name, _, anchor = target.partition("#")
            dest = (path.parent / name).resolve() if name else path
            if not dest.exists():
                problems.append(f"{path.name}: {target}: no such file")
                continue
            if anchor and dest.suffix == ".md":
                text_of_dest = files.get(dest) or dest.read_text(encoding="utf-8")
                if anchor not in heading_anchors(text_of_dest):
                    problems.append(f"{path.name}: {target}: no such heading")
    return problems


def _doc_files() -> dict[Path, str]:
    return {p.resolve(): p.read_text(encoding="utf-8") for p in [README, *sorted((ROOT / "docs").glob("*.md"))]}


def test_every_relative_link_and_anchor_of_the_docs_resolves():
    assert broken_links(_doc_files()) == []


def test_a_link_to_a_missing_heading_or_file_is_reported():
    files = _doc_files()
    readme = README.resolve()
    files[readme] += (
        "\n[a](docs/hardening.md#cjk-beyond-the-analyzer-and-kept-documents-session-40)"
        " [b](#the-databse) [c](docs/nowhere.md) [d](#the-database) [e](https://example.org/#x)"
        " `[f](#not-a-link)`\n"
    )
    assert broken_links(files) == [
        "README.md: docs/hardening.md#cjk-beyond-the-analyzer-and-kept-documents-session-40: no such heading",
        "README.md: #the-databse: no such heading",
        "README.md: docs/nowhere.md: no such file",
    ]


def test_heading_anchors_are_made_as_github_makes_them():
    text = "# kbctl\n## Changing a namespace's model\n### `make test` on two workers (2026-11-27, session 42)\n## Usage\n## Usage\n"
    assert heading_anchors(text) == {
        "kbctl",
        "changing-a-namespaces-model",
        "make-test-on-two-workers-2026-11-27-session-42",
        "usage",
        "usage-1",
    }
