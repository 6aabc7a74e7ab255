"""``bench/run.py``'s command line: which parts need the research collections, and which benchmark
homes a run stops at its end (``make bench`` and a part run alone from a fresh clone)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))


@pytest.fixture
def bench_run(monkeypatch):
    import run

    ran: list = []
    monkeypatch.setattr(run, "_run", lambda env, parts, **kw: ran.append((env, parts)) or 0)
    return run, ran


def test_a_part_that_reads_no_collection_runs_without_evaldata(bench_run, tmp_path):
    run, ran = bench_run
    none = tmp_path / "no-evaldata"  # a fresh clone: nothing beside the repository
    for part in ("filters", "changed", "memory", "cold", "million", "workers", "serve"):
        assert run.main(["--only", part, "--evaldata", str(none), "--home", str(tmp_path / "h")]) == 0
    assert [parts for _, parts in ran] == [
        [p] for p in ("filters", "changed", "memory", "cold", "million", "workers", "serve")
    ]


def test_a_part_that_reads_a_collection_still_asks_for_evaldata(bench_run, tmp_path, capsys):
    run, ran = bench_run
    with pytest.raises(SystemExit) as e:
        run.main(["--only", "filters,quality", "--evaldata", str(tmp_path / "none"), "--home", str(tmp_path / "h")])
    assert e.value.code == 2 and not ran
    assert f"no collections under {tmp_path / 'none'}" in capsys.readouterr().err


def test_a_run_stops_only_the_homes_of_the_parts_it_ran(monkeypatch, tmp_path):
    import run
    from common import Env

    home = tmp_path / "kbctl-bench"
    for suffix in ("", "-filters", "-changed", "-cold"):
        Path(str(home) + suffix).mkdir()  # each part's home of an earlier run, its server maybe up
    stopped: list[Path] = []
    monkeypatch.setattr(run, "kbctl", lambda env, *args, home, check: stopped.append(home))
    monkeypatch.setattr(run, "_part", lambda name: lambda env: "")
    env = Env(tmp_path / "evaldata", home)
    assert run._run(env, ["filters"], write=False, keep=False) == 0
    assert stopped == [tmp_path / "kbctl-bench-filters"]  # not the main home another run may be using
    stopped.clear()
    assert run._run(env, ["quality", "changed"], write=False, keep=False) == 0
    assert sorted(stopped) == [home, tmp_path / "kbctl-bench-changed"]
