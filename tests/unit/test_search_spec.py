"""``kbctl search``'s options are declared once (``kbctl.cli.search_spec``): the typer command and
the fast path both read them, and both print through one ``render``."""

from __future__ import annotations

import json

import pytest
import typer.main

from kbctl.cli.fast import _Declined, parse_search
from kbctl.cli.search import search
from kbctl.cli.search_spec import SEARCH_OPTIONS, render, search_arguments
from kbctl.types import Hit, SearchResult


def _click_params():
    app = typer.Typer(add_completion=False)
    app.command("search")(search)
    return {p.name: p for p in typer.main.get_command(app).params}


def test_the_typer_command_is_the_declaration():
    params = _click_params()
    assert list(params) == [o.param for o in SEARCH_OPTIONS]
    for o in SEARCH_OPTIONS:
        p = params[o.param]
        if o.argument:
            continue
        names = [n for f in o.flags for n in f.split("/")]
        assert sorted(p.opts + p.secondary_opts) == sorted(names), o.param
        assert p.help == o.help


@pytest.mark.parametrize("o", [o for o in SEARCH_OPTIONS if not o.argument], ids=lambda o: o.param)
def test_the_fast_path_takes_or_declines_each_declared_option(o):
    flag = o.flags[0].split("/")[0]
    value = [] if o.switches() else ["3" if o.annotation in (int, int | None) else "json"]
    as_json = [] if o.name in ("json", "jsonl", "format") else ["--json"]  # (--explain as a table declines)
    argv = ["search", "q", "-n", "ns", flag, *value, *as_json]
    if not o.fast:
        with pytest.raises(_Declined):
            parse_search(argv)
    else:
        parsed = parse_search(argv)
        assert parsed["query"] == "q" and parsed["namespace"] == ["ns"] + (["json"] if o.name == "namespace" else [])


@pytest.mark.parametrize(
    "fmt", [["--json", "--jsonl"], ["--json", "--format", "markdown"], ["--jsonl", "--format", "json"]]
)
def test_the_fast_path_leaves_two_output_formats_that_disagree_to_the_cli(fmt):
    """The CLI refuses them with a usage error; the fast path took ``--json`` and dropped the other."""
    with pytest.raises(_Declined):
        parse_search(["search", "q", "-n", "ns", *fmt])
    assert parse_search(["search", "q", "-n", "ns", "--json", "--format", "json"])["format"] == "json"


def test_the_fast_path_notes_explain_in_markdown():
    assert any(
        "--explain" in n
        for n in parse_search(["search", "q", "-n", "ns", "--explain", "--format", "markdown"])["notes"]
    )


def test_both_paths_pass_the_same_search_arguments():
    parsed = parse_search(["search", "q", "-n", "ns", "-k", "3", "-f", "a=b", "--no-rerank", "--prf", "off"])
    typer_values = {o.param: o.default for o in SEARCH_OPTIONS if o.default is not ...}
    typer_values.update(k=3, filter=["a=b"], rerank=False, prf="off")
    assert parsed["options"] == search_arguments(typer_values)
    assert parsed["options"]["filters"] == ["a=b"] and parsed["options"]["principal"] is None


def test_render_writes_json_and_jsonl_without_rich(capsys):
    hit = Hit(1, 0.5, 7, 9, "s", "T", "text é", "ns", {}, "T (s)", {})
    result = SearchResult("q", ("ns",), "lexical", "content", (hit,), notes=("a note",))
    render(result, "json", quiet=False)
    out = capsys.readouterr()
    assert json.loads(out.out) == result.to_json() and "é" in out.out and out.err == "note: a note\n"
    render(result, "jsonl", quiet=True)
    out = capsys.readouterr()
    assert [json.loads(line) for line in out.out.splitlines()] == [hit.to_json()] and out.err == ""
