"""The thread switch interval an ingest run sets (``kbctl.ingest.writer._switch_interval``) is put
back when the last run of the process ends, however runs overlap (``kbctl serve`` runs several)."""

from __future__ import annotations

import sys

import pytest

from kbctl.ingest.writer import SWITCH_INTERVAL, _switch_interval


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(before)


def test_a_run_sets_the_short_interval_and_puts_the_old_one_back(interval):
    with _switch_interval(SWITCH_INTERVAL):
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL, rel=0.05)
    assert sys.getswitchinterval() == pytest.approx(interval, rel=0.05)


def test_overlapping_runs_restore_the_interval_from_before_the_first(interval):
    first, second = _switch_interval(SWITCH_INTERVAL), _switch_interval(SWITCH_INTERVAL)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first ends while the second still runs
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL, rel=0.05)
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(interval, rel=0.05)


def test_a_shorter_interval_set_by_the_caller_is_kept(interval):
    sys.setswitchinterval(0.0001)
    with _switch_interval(SWITCH_INTERVAL):
        assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.05)
    assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.05)


def test_an_error_in_the_run_still_restores_it(interval):
    with pytest.raises(RuntimeError), _switch_interval(SWITCH_INTERVAL):
        raise RuntimeError("the run failed")
    assert sys.getswitchinterval() == pytest.approx(interval, rel=0.05)
