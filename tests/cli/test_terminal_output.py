"""End to end: a hostile document (escape sequences and rich markup in its text, title and file
name) and a failing file with such a name; every command that prints them prints them inert
(issue 26, item 6). ``--json`` keeps the stored text exact."""

from __future__ import annotations

import json
import re

import pytest

EVIL = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202e[red]boom[/red]"
NAME = EVIL.replace("/", "")  # a file name holds no slash
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def hostile(tmp_path, cli):
    root = tmp_path / "docs"
    root.mkdir()
    (root / f"evil{NAME}.md").write_text(
        f"---\ntitle: Title {EVIL}\n---\n# Heading {EVIL}\n\nplatypus body {EVIL} end\n", encoding="utf-8"
    )
    (root / f"empty{NAME}.md").write_text("", encoding="utf-8")  # an item error naming the file
    env = {"KBCTL_PROFILE": "hash-384"}
    p = cli("ingest", str(root), "-n", "evil", env=env)
    return {"env": env, "ingest": p}


def _inert(p) -> str:
    text = p.stdout.decode("utf-8") + p.stderr.decode("utf-8")
    m = UNSAFE.search(text)
    assert m is None, (m.group(), text[max(0, m.start() - 40) : m.end() + 40])
    return text


@pytest.mark.parametrize(
    "fmt",
    [(), ("--format", "markdown"), ("--format", "context"), ("--explain",), ("--format", "markdown", "--explain")],
)
def test_search_prints_stored_text_inert(hostile, cli, fmt):
    p = cli("search", "platypus", "-n", "evil", *fmt, env=hostile["env"], check=True)
    text = _inert(p)
    assert "platypus" in text
    if fmt and fmt[-1] in ("markdown", "context"):
        assert "[red]boom[/red]" in text  # markup shown as written, not applied


def test_search_json_is_exact(hostile, cli):
    p = cli("search", "platypus", "-n", "evil", "--json", env=hostile["env"], check=True)
    _inert(p)
    hit = json.loads(p.stdout)["hits"][0]
    assert hit["title"] == f"Title {EVIL}" and EVIL in hit["text"]
    p = cli("search", "platypus", "-n", "evil", "--jsonl", env=hostile["env"], check=True)
    _inert(p)
    assert EVIL in json.loads(p.stdout.splitlines()[0])["text"]


def test_ingest_runs_errors_and_namespaces_print_inert(hostile, cli):
    _inert(hostile["ingest"])
    for args in (("errors", "-n", "evil"), ("runs", "-n", "evil"), ("namespaces",), ("verify", "-n", "evil")):
        p = cli(*args, env=hostile["env"])
        assert p.returncode in (0, 3), (args, p.stderr)
        _inert(p)
    p = cli("errors", "-n", "evil", env=hostile["env"], check=True)
    assert "empty" in p.stdout.decode()


def test_show_prints_stored_text_inert_and_its_json_exact(hostile, cli):
    """``kbctl show CHUNK`` wrote the chunk's title, section and text as stored: a terminal acted
    on their escape sequences (a window title set, colours, text reversed by U+202E), where
    ``search`` prints them inert. ``--json`` keeps them exact."""
    hit = json.loads(cli("search", "platypus", "-n", "evil", "--json", env=hostile["env"], check=True).stdout)["hits"][
        0
    ]
    p = cli("show", str(hit["chunk_id"]), "-n", "evil", env=hostile["env"], check=True)
    text = _inert(p)
    assert "platypus body" in text and "[red]boom[/red]" in text
    p = cli("show", str(hit["chunk_id"]), "-n", "evil", "--json", env=hostile["env"], check=True)
    _inert(p)
    shown = json.loads(p.stdout)
    assert shown["title"] == f"Title {EVIL}" and EVIL in shown["text"] and shown["heading_path"] == [f"Heading {EVIL}"]


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_a_terminal_that_is_not_utf8_gets_every_output_without_a_traceback(cli_process, tmp_path, encoding):
    """A locale of another encoding (``LANG=en_US.ISO-8859-1``; ``PYTHONIOENCODING`` says the same
    to Python): stdout cannot write ``→``, CJK or an emoji. Every JSON output was a traceback
    (``UnicodeEncodeError``), as were tables and Markdown. JSON is now exact in any encoding
    (``\\u`` escapes); text for people shows what it cannot write as an escape."""
    text = "Le remboursement → cinq jours; 退款 五天 🎉"
    root = tmp_path / "docs"
    root.mkdir()
    (root / "remboursement→退款.md").write_text(f"# Remboursement\n\n{text}\n", encoding="utf-8")
    env = {"KBCTL_PROFILE": "hash-384", "PYTHONIOENCODING": encoding}
    p = cli_process("ingest", str(root), "-n", "latin", "--json", env=env)
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["documents"]["new"] == 1
    p = cli_process("fetch", str(root), env=env)
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout.splitlines()[0])["source"]["uri"].endswith("remboursement→退款.md")
    p = cli_process("search", "remboursement", "-n", "latin", "--json", env=env)
    assert p.returncode == 0, p.stderr.decode()
    assert text in json.loads(p.stdout)["hits"][0]["text"]
    p = cli_process("search", "remboursement", "-n", "latin", "--jsonl", env=env)
    assert p.returncode == 0, p.stderr.decode()
    assert text in json.loads(p.stdout.splitlines()[0])["text"]
    for fmt in ((), ("--format", "markdown"), ("--format", "context")):
        p = cli_process("search", "remboursement", "-n", "latin", *fmt, env=env)
        assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode()
        assert b"remboursement" in p.stdout.lower() and b"\\u2192" in p.stdout, p.stdout
