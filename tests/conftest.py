"""Shared fixtures: one embedded PostgreSQL per test session, isolated per test by tenant.

The server runs in a temporary KBCTL_HOME and is stopped when the session ends, so no server
process outlives the tests. Every test gets its own tenant, so namespaces never collide.

With ``KBCTL_TEST_DSN`` set (``make test-dsn``), the same fixtures use that server instead: a
separate PostgreSQL reached by DSN (``tests/pgserver_tcp.py``), as kbctl's login, not a superuser.
kbctl then takes a DSN's tenants as given (``kbctl tenants create``), so the session creates a
test's tenant when it is first used, as the embedded server does on its own for a write (and, as
there, never a deleted one: ``kbctl.store.tenants.role_for_use``). Embedded, a read never makes a
tenant; the session still makes a test's own (``t_…``) on its first use, read or write, and
``cli_process`` registers it before its processes run. Tests that are about
the embedded server itself (its process, data directory, superuser) are marked ``embedded_only``
and skipped there.

``cli`` runs a command in this process through ``kbctl.cli.main.main``, the CLI's error boundary
(exit codes, one-line errors); ``cli_process`` runs ``python -m kbctl`` for the few tests where a
real process is the point (stdout/stderr of a process, pipes).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_corpus"


# Under pytest-xdist (``make test`` runs two workers) each worker starts with COLUMNS=80 in its
# environment, which the CLI reads as a terminal's width (kbctl.cli.state): the suite's CLI output
# must be what it is in one process, off a terminal.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

#: The DSN of a separate server the database tests run against (``make test-dsn``), or "".
TEST_DSN = os.environ.get("KBCTL_TEST_DSN", "")


@pytest.fixture(scope="session")
def kb_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("kbctl-home")
    _seed_models(home, tmp_path_factory)
    if not TEST_DSN:
        _no_fsync(home)
    old = os.environ.get("KBCTL_HOME")
    os.environ["KBCTL_HOME"] = str(home)
    with _dsn_server():
        yield home
    from kbctl.config import load_settings
    from kbctl.store.db import Database

    Database(load_settings(overrides={"database.home": str(home)})).stop()
    if old is None:
        os.environ.pop("KBCTL_HOME", None)
    else:
        os.environ["KBCTL_HOME"] = old


# The real profile's ``auto`` decision and ONNX export (``kbctl.embed.prepare``: a minute and more
# of torch on 2 cores), made once for the session's xdist workers, not once in each worker's home.
_PREPARE = (
    "import sys; from kbctl.config import load_settings; from kbctl.embed import prepare;"
    "prepare(load_settings(overrides={'database.home': sys.argv[1]}).profile('minilm'))"
)


def _seed_models(home: Path, tmp_path_factory) -> None:
    """Under pytest-xdist, fill ``home/models`` with what the first use of the real profile would
    measure and export there (``kbctl.embed.prepare``), made once for the session by whichever worker
    comes first (a lock: the other waits for it) in a process of its own, so no worker holds models it
    would not have loaded; each home gets its own copy. One process (``PYTEST_WORKERS=0``,
    a single test file) seeds nothing: the home's first use measures and exports, as it always did."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import fcntl
    import shutil

    shared = tmp_path_factory.getbasetemp().parent / "kbctl-models-seed"  # this session's, both workers'
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = shared / "home" / "models"
        if not (shared / "ready").exists():
            # a machine without the model: nothing seeded, the tests that need it say so themselves
            subprocess.run(
                [sys.executable, "-c", _PREPARE, str(shared / "home")],
                env=dict(os.environ, PYTHONWARNINGS="ignore"),
                cwd=ROOT,
                capture_output=True,
                timeout=1200,
            )
            (shared / "ready").touch()
    if ready.is_dir():
        shutil.copytree(ready, home / "models")


def _no_fsync(home: Path) -> None:
    """The session's embedded server writes without ``fsync`` (``full_page_writes`` off too), as
    ``make test-dsn``'s server does (``tests/pgserver_tcp.py``): its data directory is the session's,
    thrown away at the end, and only a crash of the machine, not of PostgreSQL or of a kbctl process,
    loses what was not flushed. Every commit waited for the disk (~4 ms a commit here, more with the
    disk shared) for a durability no test reads; ``synchronous_commit`` stays on, so a commit still
    survives a PostgreSQL killed under it."""
    from kbctl.config import load_settings
    from kbctl.store.db import Database

    db = Database(load_settings(overrides={"database.home": str(home)}))
    with db.connect(register=False) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET full_page_writes = off")
        conn.execute("SELECT pg_reload_conf()")


@contextlib.contextmanager
def _dsn_server():
    """With ``KBCTL_TEST_DSN``: every kbctl of the session (this process and its children, through
    ``KBCTL_DSN``) uses that server, migrated once, and a tenant is created on first use. Embedded:
    a test's tenant (``t_…``: the ``tenant`` fixture's, and names made from it) is made on its first
    use, a read's too, as before reads stopped making tenants; any other name meets kbctl's rule (a
    read of a name never made is refused: ``kbctl.api.session.Session.writing``)."""
    from kbctl.store import tenants

    old = os.environ.get("KBCTL_DSN")
    if TEST_DSN:
        os.environ["KBCTL_DSN"] = TEST_DSN
    first_use = tenants.role_for_use

    @functools.wraps(first_use)  # ``__wrapped__``: kbctl's own rule, for the tests about it
    def role_for_use(conn, tenant: str, *, create: bool) -> str:
        # as embedded for a write: made on first use, a deleted one never
        return first_use(conn, tenant, create=create or bool(TEST_DSN) or tenant.startswith("t_"))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tenants, "role_for_use", role_for_use)
        yield
    if not TEST_DSN:
        return
    if old is None:
        os.environ.pop("KBCTL_DSN", None)
    else:
        os.environ["KBCTL_DSN"] = old


_MIGRATED: list[bool] = []


def _create_tenant(tenant: str, home: Path | None = None) -> None:
    """Register ``tenant`` on the DSN server, or the embedded server of ``home`` (for the ``kbctl``
    processes a test starts: in them no first use of a read makes it)."""
    from kbctl.config import load_settings
    from kbctl.store import tenants
    from kbctl.store.db import Database

    db = Database(load_settings(overrides={"database.dsn": TEST_DSN} if TEST_DSN else {"database.home": str(home)}))
    if not TEST_DSN or not _MIGRATED:
        db.migrate()
        if TEST_DSN:
            _MIGRATED.append(True)
    with db.connect(register=False) as conn:
        tenants.create_tenant(conn, tenant)


def tenant_rows(kb) -> tuple:
    """What a write to ``kb``'s tenant would change: its namespaces', documents' and chunks' counts
    and last ids (read as the tenant's role: its own rows). A fixture made once for a module, that
    its tests only read, asserts it unchanged in its teardown (STYLE.md, tests)."""
    conn = kb.connection()
    return (
        conn.execute("SELECT count(*), max(id) FROM kbctl.namespaces").fetchone(),
        conn.execute("SELECT count(*), max(id), max(updated_at) FROM kbctl.documents").fetchone(),
        conn.execute("SELECT count(*), max(id) FROM kbctl.chunks").fetchone(),
    )


def read_only_kb(kb_home, tenant: str, fill, hint: str):
    """A module fixture's knowledge base in a tenant of the module's (registered under
    ``KBCTL_TEST_DSN``), filled once by ``fill(kb)``; yields it, then asserts ``tenant_rows``
    unchanged (``hint``: what a test that writes should take instead) and closes it."""
    import kbctl

    if TEST_DSN:
        _create_tenant(tenant)
    kb = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384")
    fill(kb)
    made = tenant_rows(kb)
    yield kb
    assert tenant_rows(kb) == made, f"a test wrote to {tenant}'s read-only fixture: {hint}"
    kb.close()


@pytest.fixture
def tenant(request) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())
    if len(slug) > 40:  # two tests (or two parameters of one) alike in their first 40: two tenants
        slug = slug[:31] + "_" + hashlib.sha256(slug.encode()).hexdigest()[:8]
    name = "t_" + slug
    if TEST_DSN:
        _create_tenant(name)
    return name


@pytest.fixture
def kb(kb_home, tenant):
    """A KnowledgeBase on the session's embedded server, in this test's own tenant, hash profile."""
    import kbctl

    k = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384")
    yield k
    k.close()


@pytest.fixture
def real_kb(kb_home, tenant):
    """Like ``kb`` but with the real all-MiniLM-L6-v2 profile."""
    import kbctl

    k = kbctl.open(home=kb_home, tenant=tenant, profile="minilm")
    yield k
    k.close()


def write_folder(parent: Path, name: str, files: Mapping[str, str]) -> str:
    """A folder ``parent/name`` holding ``files`` (file name to UTF-8 text); its path, for ``ingest``."""
    d = parent / name
    d.mkdir(exist_ok=True)
    for file, text in files.items():
        (d / file).write_text(text, encoding="utf-8")
    return str(d)


def set_in_chunker(m: pytest.MonkeyPatch, attr: str, value) -> None:
    """Set ``attr`` of the chunker to ``value`` (undone with ``m``), to emulate an earlier revision:
    in ``kbctl.chunk`` and in every module of the package that binds the name, since a module reads
    what it imports from a sibling in its own namespace (``kbctl.chunk.sentences._line_windows`` is
    not ``kbctl.chunk.semantic._line_windows`` once one is set). A name no module binds is an error."""
    import importlib
    import pkgutil

    import kbctl.chunk as chunk

    modules = [chunk, *(importlib.import_module(f"kbctl.chunk.{i.name}") for i in pkgutil.iter_modules(chunk.__path__))]
    bound = [module for module in modules if hasattr(module, attr)]
    assert bound, f"no module of kbctl.chunk binds {attr}"
    for module in bound:
        m.setattr(module, attr, value)


@dataclass(frozen=True)
class CliResult:
    """What a ``kbctl`` command did: the fields of ``subprocess.CompletedProcess`` the tests read."""

    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


def run_kbctl(args, *, input: bytes | None = None, env: Mapping[str, str | None] | None = None) -> CliResult:
    """``kbctl ARGS`` in this process, through ``main()``; stdin, stdout, stderr and ``env`` isolated.

    ``main()`` is the error boundary of ``python -m kbctl``: it exits with the command's code after
    turning a KbctlError into one line on stderr. Any other exception propagates into the test.
    """
    from typer.testing import CliRunner

    from kbctl.cli.main import main

    code: int | str | None = 0
    with (
        warnings.catch_warnings(),
        contextlib.chdir(ROOT),
        CliRunner().isolation(input=input, env=env) as (out, err, _),
    ):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return CliResult(
            tuple(args), code if isinstance(code, int) else (0 if code is None else 1), out.getvalue(), err.getvalue()
        )


def main_in_process(capsys, argv: list[str]) -> tuple[int | str | None, str, str]:
    """``kbctl.cli.main.main(argv)`` in this process, so a test's monkeypatches apply: (exit code,
    stdout, stderr) as ``capsys`` caught them. The CLI's handle is dropped before and after, so each
    call opens its own with its own options."""
    from kbctl.cli.main import main
    from kbctl.cli.state import STATE

    STATE._kb = None
    capsys.readouterr()
    try:
        with pytest.raises(SystemExit) as ex:
            main(argv)
    finally:
        STATE._kb = None
    out, err = capsys.readouterr()
    return ex.value.code, out, err


@pytest.fixture
def cli(kb_home, tenant):
    """Run ``kbctl`` in this process against the session's server and this test's tenant."""

    def run(
        *args: str,
        input: bytes | None = None,
        check: bool = False,
        tenant_override: str | None = None,
        env: dict | None = None,
    ):
        p = run_kbctl(
            args,
            input=input,
            env={"KBCTL_HOME": str(kb_home), "KBCTL_TENANT": tenant_override or tenant, **(env or {})},
        )
        if check and p.returncode != 0:
            raise AssertionError(f"kbctl {' '.join(args)} exited {p.returncode}:\n{p.stderr.decode()}")
        return p

    return run


@pytest.fixture
def cli_process(kb_home, tenant):
    """Run ``python -m kbctl`` in a subprocess against the session's server and this test's tenant."""

    if not TEST_DSN:
        _create_tenant(tenant, kb_home)  # a process of its own: the session's first use does not reach it

    def run(*args: str, input: bytes | None = None, tenant_override: str | None = None, env: dict | None = None):
        e = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant_override or tenant, PYTHONWARNINGS="ignore")
        e.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "kbctl", *args], input=input, capture_output=True, env=e, cwd=ROOT, timeout=600
        )

    return run


def pytest_configure(config):
    config.addinivalue_line("markers", "db: needs the embedded PostgreSQL (set on every test using kb_home)")
    config.addinivalue_line("markers", "embedded_only: about the embedded server itself; skipped with KBCTL_TEST_DSN")


def pytest_collection_modifyitems(config, items):
    """Mark every test that reaches the store (all its fixtures go through ``kb_home``) as ``db``, so
    ``make unit`` (``-m "not db"``) runs only what needs no database; with ``KBCTL_TEST_DSN`` (``make
    test-dsn``) skip the tests about the embedded server itself (``embedded_only``)."""
    skip = pytest.mark.skip(reason="about the embedded server; this run uses KBCTL_TEST_DSN")
    for item in items:
        if "kb_home" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)
        if TEST_DSN and "embedded_only" in item.keywords:
            item.add_marker(skip)
