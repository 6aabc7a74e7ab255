"""The files ``kbctl eval`` writes (``run``'s ``--json``, ``--report``, ``--junit``;
``import-feedback``'s ``--out``) are checked before the work whose result they hold: a path that
cannot be written (a folder, or under a file, which stops root too) is refused in one line with a
hint, exit 2, before the store is read or a query searched."""

from __future__ import annotations

import pytest

from kbctl.errors import UsageError


@pytest.fixture
def afile(tmp_path):
    f = tmp_path / "afile"
    f.write_text("not a folder\n")
    return f


def _refused(p, flag: str, path, where) -> None:
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and p.stdout == b"", p.stderr
    assert lines == [
        f"error: {flag} {path}: {where} is a file, not a folder",
        "hint: write the file in a folder that exists",
    ], p.stderr


def test_an_eval_run_output_under_a_file_is_refused_before_any_search(cli, afile, tmp_path):
    """``--json DIR/x`` where DIR is a file was refused as "there is no folder DIR" with the hint
    to create it (it cannot be: a file has its name). It names the file now; the dataset's
    namespace does not exist, and the output is what is refused: nothing was searched."""
    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"id": "q1", "query": "refunds", "namespace": "no_such_ns", "relevant": ["file:///a.md"]}\n')
    for flag in ("--json", "--report", "--junit"):
        for path in (afile / "out.x", afile / "sub" / "out.x"):
            p = cli("eval", "run", str(golden), flag, str(path), "--modes", "lexical")
            _refused(p, flag, path, afile)


def test_import_feedback_refuses_an_output_it_cannot_write_before_reading_the_store(cli, kb, afile, tmp_path):
    """``kbctl eval import-feedback -o FILE/x.jsonl`` read the judged queries, then failed writing
    with a traceback (``NotADirectoryError``; ``IsADirectoryError`` for ``-o`` a folder). The
    output is checked first, by the CLI and the library: one line, a hint, exit 2, and the store not
    read (a namespace that does not exist is not what is refused)."""
    kb.create_namespace("fb", "hash-384")
    p = cli("eval", "import-feedback", "-n", "fb", "-o", str(afile / "g.jsonl"))
    _refused(p, "--out", afile / "g.jsonl", afile)
    p = cli("eval", "import-feedback", "-n", "fb", "-o", str(tmp_path))
    assert p.returncode == 2 and p.stderr.decode().splitlines()[0] == f"error: --out {tmp_path} is a folder", p.stderr
    with pytest.raises(UsageError) as e:
        kb.import_feedback("no_such_ns", afile / "g.jsonl")
    assert e.value.message == f"path {afile / 'g.jsonl'}: {afile} is a file, not a folder"
    ok = cli("eval", "import-feedback", "-n", "fb", "-o", str(tmp_path / "g.jsonl"))
    assert ok.returncode == 0 and (tmp_path / "g.jsonl").read_text() == "", ok.stderr
