"""Every script under ``bench/`` that runs on its own answers ``--help`` and starts nothing.

``python bench/rls.py --help`` took ``--help`` for its scratch home: it started an embedded
PostgreSQL in a folder named ``--help`` and ingested the sample corpus into it;
``bench/lifecycle.py --help`` raised IndexError. One interpreter runs each script's ``__main__``
with ``--help`` in an empty folder and reports its exit code, what it printed and what it made.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py") if 'if __name__ == "__main__"' in p.read_text())

PROBE = textwrap.dedent(
    """
    import contextlib, io, json, os, runpy, sys
    bench, names = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, bench)
    out = {}
    for name in names:
        sys.argv = [name, "--help"]
        printed = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            try:
                runpy.run_path(os.path.join(bench, name), run_name="__main__")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException as e:
                code, _ = -1, printed.write(repr(e))
        out[name] = {"code": code, "printed": printed.getvalue()[:400], "made": sorted(os.listdir("."))}
    print(json.dumps(out))
    """
)


def test_every_bench_script_answers_help_and_starts_nothing(tmp_path):
    assert {"run.py", "rls.py", "lifecycle.py", "prf_predictors.py"} <= set(SCRIPTS)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "bench"), *SCRIPTS],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    wrong = {
        name: r
        for name, r in seen.items()
        if r["code"] != 0 or "usage" not in r["printed"].lower() or r["made"] not in ([], ["__pycache__"])
    }
    assert not wrong, wrong
