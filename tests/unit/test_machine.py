"""The machine's figures (``kbctl.machine``) and how they bound ``kbctl ingest --workers N``
(``kbctl.api.ingest.local_workers``): given as arguments, never this machine's."""

from __future__ import annotations

import os

import pytest

from kbctl import machine
from kbctl.api.ingest import (
    SPARE_CONNECTIONS,
    WORKER_CONNECTIONS,
    WORKER_MEMORY,
    WORKER_MEMORY_NO_MODEL,
    local_workers,
)
from kbctl.config import load_settings

GIB = 1 << 30
MEMINFO = "MemTotal:       24684000 kB\nMemFree:         2048000 kB\nMemAvailable:    3145728 kB\nBuffers: 1 kB\n"


@pytest.fixture
def no_cgroup(tmp_path):
    return tmp_path / "no-cgroup"


def test_available_memory_is_memavailable_of_proc_meminfo(tmp_path, no_cgroup):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    assert machine.available_memory(meminfo, no_cgroup) == 3 * GIB


def test_without_memavailable_the_free_pages_of_sysconf_count(tmp_path, no_cgroup, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1000 kB\nMemFree: 500 kB\n")  # a kernel before 3.14
    pages = {"SC_AVPHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert machine.available_memory(meminfo, no_cgroup) == 4096000
    assert machine.available_memory(tmp_path / "none", no_cgroup) == 4096000  # no /proc at all


def test_with_nothing_to_read_memory_is_unknown(tmp_path, no_cgroup, monkeypatch):
    def unknown(name):
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", unknown)
    assert machine.available_memory(tmp_path / "none", no_cgroup) is None


def test_a_cgroup_memory_limit_bounds_what_is_available(tmp_path):
    """In a container the host's MemAvailable overstates the room: the cgroup's limit, less what it
    holds but its reclaimable page cache, is what the OOM killer goes by."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO)
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text(f"{2 * GIB}\n")
    (cgroup / "memory.current").write_text(f"{GIB + GIB // 2}\n")
    (cgroup / "memory.stat").write_text(f"anon 123\nfile 456\ninactive_file {GIB // 4}\nactive_file 7\n")
    assert machine.available_memory(meminfo, cgroup) == GIB // 2 + GIB // 4
    (cgroup / "memory.max").write_text("max\n")  # no limit: the machine's figure
    assert machine.available_memory(meminfo, cgroup) == 3 * GIB


def test_cpu_count_is_the_cpus_this_process_may_run_on(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3}, raising=False)
    assert machine.cpu_count() == 2
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # not on Linux
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert machine.cpu_count() == 1


def _profile(name: str):
    return load_settings(env={}).profile(name, embedder=False)


ROOMY = {"free": 1000, "limit": 1000, "memory": 1 << 40, "cpus": 64}


def test_a_roomy_machine_starts_every_worker_asked():
    assert local_workers(8, **ROOMY, profile=_profile("minilm")) == (8, [])


def test_workers_of_a_model_are_no_more_than_the_available_memory_holds():
    n, warnings = local_workers(8, **{**ROOMY, "memory": 3 * WORKER_MEMORY + 1}, profile=_profile("minilm"))
    assert n == 3
    assert warnings == [
        "starting 3 of the 8 workers asked: this machine has 3,072 MB of memory available"
        " and a worker takes about 1,024 MB"
    ]


def test_workers_of_a_model_are_no_more_than_the_cpus():
    n, warnings = local_workers(8, **{**ROOMY, "cpus": 2}, profile=_profile("minilm"))
    assert n == 2 and len(warnings) == 1 and "2 CPU(s)" in warnings[0], warnings


def test_workers_of_the_hash_embedder_load_no_model_and_are_not_bound_by_the_cpus():
    """The ``hash`` embedder loads no model: its workers take far less memory and the CPUs do not
    bound them (what a test, a benchmark or an I/O-bound fetch runs)."""
    roomy = {**ROOMY, "cpus": 1, "memory": 4 * WORKER_MEMORY_NO_MODEL}
    assert local_workers(4, **roomy, profile=_profile("hash-384")) == (4, [])
    n, warnings = local_workers(6, **roomy, profile=_profile("hash-384"))
    assert n == 4 and "memory" in warnings[0]


def test_each_bound_that_takes_workers_away_says_so_once_and_the_tightest_wins():
    free = SPARE_CONNECTIONS + 5 * WORKER_CONNECTIONS  # room for five
    n, warnings = local_workers(9, free=free, limit=100, memory=3 * WORKER_MEMORY, cpus=2, profile=_profile("minilm"))
    assert n == 2
    assert [w.split(":")[0] for w in warnings] == [
        "starting 5 of the 9 workers asked",
        "starting 3 of the 5 workers asked",
        "starting 2 of the 3 workers asked",
    ]


def test_at_least_one_worker_starts_when_the_figures_changed_since_the_run_opened():
    """The run was refused before it opened when no worker fitted; the figures read when the
    workers start may be lower by then, and the run's items still need a worker."""
    n, _ = local_workers(4, free=0, limit=100, memory=0, cpus=1, profile=_profile("minilm"))
    assert n == 1
