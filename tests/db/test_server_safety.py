"""The embedded server's pid file is never trusted blindly.

``postmaster.pid`` names a PID; after a reboot or in a copied data directory that PID may belong to
any process. kbctl signals a PID only once it has proven it is PostgreSQL serving this very data
directory. A pid file naming anything else is stale: it is removed and said so, and nothing is
killed. A corrupt pid file (no PID on its first line) is an error of one line with a hint: kbctl
cannot tell whose it was, so it neither deletes it nor guesses (``db stop`` still stops a server it
finds serving the directory by other means). Each test runs in its own fresh KBCTL_HOME, so the
session's server is never disturbed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _kbctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("KBCTL_DSN", None)
    return subprocess.run(
        [sys.executable, "-m", "kbctl", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.fixture(scope="module")
def initialised(tmp_path_factory):
    """A home whose data directory was initialised (and migrated), started and stopped, once for the
    module (initdb is most of the 3-4 s a start from nothing takes), with its pid file's lines."""
    home = tmp_path_factory.mktemp("initialised") / "home"
    p = _kbctl(home, "db", "start")
    assert p.returncode == 0, p.stderr
    pid_file = home / "pgdata" / "postmaster.pid"
    lines = pid_file.read_text().splitlines()
    p = _kbctl(home, "db", "stop")
    assert p.returncode == 0, p.stderr
    assert not pid_file.exists()
    return home, lines


@pytest.fixture
def fresh_home(tmp_path, initialised):
    """A home of this test's own holding a copy of the initialised, stopped data directory (as a
    stopped cluster is copied: owner and modes kept); whatever server the test leaves in it is stopped."""
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["cp", "-a", str(initialised[0] / "pgdata"), str(home / "pgdata")], check=True)
    yield home
    _kbctl(home, "db", "stop")


@pytest.fixture
def stopped_home(fresh_home, initialised):
    """A fresh home whose data directory was initialised, started and stopped: a real pid file's
    shape, its lines naming this home's directory as its own server's would."""
    template, lines = initialised
    assert not (fresh_home / "pgdata" / "postmaster.pid").exists()
    return fresh_home, [ln.replace(str(template), str(fresh_home)) for ln in lines]


@pytest.fixture
def bystander():
    """An unrelated live process whose PID a stale pid file will name."""
    proc = subprocess.Popen(["sleep", "1000"])
    yield proc
    proc.kill()
    proc.wait()


def _write_pid(home: Path, lines: list[str], pid: int) -> Path:
    pid_file = home / "pgdata" / "postmaster.pid"
    pid_file.write_text("\n".join([str(pid), *lines[1:]]) + "\n")
    return pid_file


def _one_line(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert "LOG:" not in stderr and "FATAL" not in stderr, stderr  # no PostgreSQL log dumped
    assert len([ln for ln in stderr.splitlines() if ln.strip()]) <= 2, stderr  # the error and its hint


def test_stop_with_stale_pid_file_spares_the_process_it_names(stopped_home, bystander):
    home, lines = stopped_home
    pid_file = _write_pid(home, lines, bystander.pid)
    p = _kbctl(home, "db", "stop")
    time.sleep(0.3)
    assert bystander.poll() is None, "kbctl db stop killed an unrelated process named by a stale pid file"
    assert p.returncode == 0, p.stderr
    assert "stale" in p.stderr and str(bystander.pid) in p.stderr, p.stderr
    assert "not running" in p.stderr
    assert not pid_file.exists()


def test_start_with_stale_pid_file_removes_it_and_starts(stopped_home, bystander):
    home, lines = stopped_home
    _write_pid(home, lines, bystander.pid)
    p = _kbctl(home, "db", "start")
    assert p.returncode == 0, p.stderr
    assert "stale" in p.stderr
    assert bystander.poll() is None
    pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
    assert pid != bystander.pid and _alive(pid)
    p = _kbctl(home, "db", "stop")
    assert p.returncode == 0 and "stopped" in p.stderr, p.stderr
    assert not _alive(pid)


@pytest.mark.embedded_only  # about the embedded server's data directory
def test_pid_file_naming_another_directorys_postmaster_is_stale(stopped_home, kb):
    """A copied data directory names the original's postmaster: a PostgreSQL, but not serving us."""
    home, lines = stopped_home
    kb.connection()  # the session's server is up
    other = kb.settings.home / "pgdata" / "postmaster.pid"
    other_pid = int(other.read_text().split()[0])
    _write_pid(home, lines, other_pid)
    p = _kbctl(home, "db", "stop")
    assert p.returncode == 0, p.stderr
    assert "stale" in p.stderr
    time.sleep(0.3)
    assert _alive(other_pid)
    assert kb.connection().execute("SELECT 1").fetchone()[0] == 1


@pytest.mark.embedded_only  # about the embedded server's process
def test_stop_stops_a_running_server(fresh_home):
    home = fresh_home
    assert _kbctl(home, "db", "start").returncode == 0
    pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
    p = _kbctl(home, "db", "stop")
    assert p.returncode == 0 and "stopped" in p.stderr, p.stderr
    assert not _alive(pid)
    assert not (home / "pgdata" / "postmaster.pid").exists()
    p = _kbctl(home, "db", "stop")
    assert p.returncode == 0 and "not running" in p.stderr, p.stderr


@pytest.mark.parametrize("content", ["garbage\n", "", "12abc\n"])
def test_corrupt_pid_file_is_one_line_with_a_hint(stopped_home, content):
    home, _ = stopped_home
    pid_file = home / "pgdata" / "postmaster.pid"
    pid_file.write_text(content)
    for args in (("db", "stop"), ("db", "start"), ("db", "url")):
        p = _kbctl(home, *args)
        assert p.returncode == 1, (args, p.stderr)
        _one_line(p.stderr)
        assert "postmaster.pid" in p.stderr and "corrupt" in p.stderr, p.stderr
        assert "delete" in p.stderr.lower(), p.stderr  # the hint says what to do
    assert pid_file.read_text() == content  # not removed on a guess


def test_missing_pid_file_under_a_running_server(fresh_home):
    """The pid file deleted under a running server: one line naming the server, and stop still stops it."""
    home = fresh_home
    assert _kbctl(home, "db", "start").returncode == 0
    pid_file = home / "pgdata" / "postmaster.pid"
    pid = int(pid_file.read_text().split()[0])
    pid_file.unlink()
    try:
        for _ in range(2):
            p = _kbctl(home, "db", "url")
            assert p.returncode == 1, p.stderr
            _one_line(p.stderr)
            assert "postmaster.pid" in p.stderr and str(pid) in p.stderr and "kbctl db stop" in p.stderr, p.stderr
        p = _kbctl(home, "db", "stop")
        assert p.returncode == 0 and "stopped" in p.stderr, p.stderr
        assert not _alive(pid)
        p = _kbctl(home, "db", "start")
        assert p.returncode == 0, p.stderr
    finally:
        if _alive(pid):
            os.kill(pid, 2)
