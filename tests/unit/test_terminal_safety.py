"""Output is neutralised for terminals (issue 26, item 6): stored text (a document's text, title,
file name, an item's error) never reaches a terminal as a control sequence or as rich markup.

Every human format of a search (table, markdown, context) on both render paths (the CLI's
``kbctl.cli.render`` and the one renderer both paths share, ``kbctl.cli.search_spec.render``), tables of other listings,
warnings, notes and the error line. JSON stays exact: it decodes to the stored text.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.types import Hit, SearchResult

HOSTILE = (
    "\x1b[2J\x1b[31mred\x1b]0;pwned\x07 csi\x9b31m bell\x07 bs\x08 cr\r nul\x00 del\x7f "
    "\u202eevil\u202c \u2066iso\u2069 [red]markup[/red] [link=https://evil.example]l[/link]"
)
# What a terminal may act on: C0 but newline and tab, DEL, C1, and the bidi embeddings,
# overrides and isolates (an override can make text read differently than it is).
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _hit(text: str = HOSTILE, title: str = HOSTILE, source: str = HOSTILE) -> Hit:
    return Hit(
        rank=1,
        score=0.5,
        doc_id=1,
        chunk_id=1,
        source=source,
        title=title,
        text=text,
        namespace="n" + HOSTILE,
        metadata={"path": HOSTILE},
        citation=f"{title} ({source})",
        lanes={},
        relevance=0.5,
    )


def _result(hit: Hit | None = None, query: str = HOSTILE) -> SearchResult:
    return SearchResult(
        query,
        ("a", "b"),
        "hybrid",
        "content",
        (hit or _hit(),),
        notes=("corrected: " + HOSTILE,),
        withheld=0,
    )


def _clean(out: str) -> None:
    assert not UNSAFE.search(out), repr(UNSAFE.search(out).group())  # type: ignore[union-attr]


def test_printable_escapes_controls_and_keeps_layout():
    from kbctl.cli.terminal import printable

    s = printable(HOSTILE + "\nnext\tcol")
    _clean(s)
    assert "\nnext\tcol" in s and "\\x1b[2J" in s and "\\u202e" in s and "[red]markup[/red]" in s
    assert printable("plain text, ünïcode, 漢字, emoji 👩\u200d💻") == "plain text, ünïcode, 漢字, emoji 👩\u200d💻"
    assert "\n" not in printable("a\nb", keep="")


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_cli_render_neutralises_hits(capsys, fmt):
    from kbctl.cli.render import hits_markdown, hits_table
    from kbctl.cli.state import out

    if fmt == "table":
        hits_table(_result())
    else:
        out.print(hits_markdown(_result()), markup=False, highlight=False)
    got = capsys.readouterr().out
    _clean(got)
    assert "[red]markup" in got and "\\x1b" in got


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "jsonl"])
def test_fast_path_render_neutralises_hits(capsys, fmt):
    from kbctl.cli.search_spec import render as _render

    _render(_result(), fmt, quiet=False)
    cap = capsys.readouterr()
    _clean(cap.err)
    _clean(cap.out)
    if fmt == "json":
        d = json.loads(cap.out)
        assert d["hits"][0]["text"] == HOSTILE and d["hits"][0]["title"] == HOSTILE  # exact
    elif fmt == "jsonl":
        assert json.loads(cap.out)["text"] == HOSTILE
    else:
        assert "[red]markup" in cap.out


def test_cli_json_stays_exact_and_inert(capsys):
    from kbctl.cli.render import print_json, print_jsonl

    print_json(_result().to_json())
    print_jsonl([_hit().to_json()])
    out = capsys.readouterr().out
    _clean(out)
    first, second = out.splitlines()
    assert json.loads(first)["hits"][0]["text"] == HOSTILE and json.loads(second)["source"] == HOSTILE


def test_tables_warnings_and_errors_are_neutralised(capsys):
    from kbctl.cli.render import table
    from kbctl.cli.state import STATE, info, warn

    STATE.quiet = False
    table([{"source": HOSTILE, "message": HOSTILE, "n": 1}])
    warn("cannot read " + HOSTILE)
    info("stored " + HOSTILE)
    cap = capsys.readouterr()
    _clean(cap.out)
    _clean(cap.err)
    assert "[red]markup" in cap.out and "[red]markup" in cap.err


def test_error_line_is_neutralised(capsys):
    from kbctl.cli.main import _report
    from kbctl.errors import UsageError

    _report(UsageError("bad " + HOSTILE, hint="try " + HOSTILE))
    err = capsys.readouterr().err
    _clean(err)
    assert err.startswith("error: bad ") and len(err.strip().splitlines()) == 2


def test_log_records_are_neutralised():
    from kbctl.cli.state import TerminalFormatter

    rec = logging.LogRecord("kbctl.x", logging.WARNING, __file__, 1, "skipped %s", (HOSTILE,), None)
    _clean(TerminalFormatter("%(levelname)s %(name)s: %(message)s").format(rec))


_stored = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)


@settings(max_examples=150, deadline=None)
@given(text=_stored, title=_stored, source=_stored)
def test_rendered_output_never_holds_control_characters(text, title, source):
    """For any stored text, title and source, every human rendering is inert and JSON is exact."""
    import io

    from rich.console import Console

    from kbctl.cli import render
    from kbctl.cli.search_spec import render as _render

    result = _result(_hit(text, title, source), query=title)
    buf = io.StringIO()
    console = Console(file=buf, width=120, soft_wrap=True)
    old = render.out
    render.out = console
    try:
        render.hits_table(result)
        console.print(render.hits_markdown(result), markup=False, highlight=False)
    finally:
        render.out = old
    _clean(buf.getvalue())
    import contextlib

    for fmt in ("json", "markdown"):
        o, e = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            _render(result, fmt, quiet=False)
        _clean(o.getvalue())
        _clean(e.getvalue())
        if fmt == "json":
            assert json.loads(o.getvalue())["hits"][0]["text"] == text
