"""Shared fixtures: one embedded PostgreSQL per test session, isolated per test by tenant.

The server runs in a temporary KBCTL_HOME and is stopped when the session ends, so no server
process outlives the tests. Every test gets its own tenant, so namespaces never collide.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_corpus"


@pytest.fixture(scope="session")
def kb_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("kbctl-home")
    old = os.environ.get("KBCTL_HOME")
    os.environ["KBCTL_HOME"] = str(home)
    yield home
    from kbctl.config import load_settings
    from kbctl.db import Database

    Database(load_settings(overrides={"database.home": str(home)})).stop()
    if old is None:
        os.environ.pop("KBCTL_HOME", None)
    else:
        os.environ["KBCTL_HOME"] = old


@pytest.fixture
def tenant(request) -> str:
    return "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]


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


@pytest.fixture
def cli(kb_home, tenant):
    """Run ``kbctl`` in a subprocess against the session's server and this test's tenant."""

    def run(*args: str, input: bytes | None = None, check: bool = False, tenant_override: str | None = None, env: dict | None = None):
        e = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant_override or tenant, PYTHONWARNINGS="ignore")
        e.update(env or {})
        p = subprocess.run(
            [sys.executable, "-m", "kbctl", *args], input=input, capture_output=True, env=e, cwd=ROOT, timeout=600
        )
        if check and p.returncode != 0:
            raise AssertionError(f"kbctl {' '.join(args)} exited {p.returncode}:\n{p.stderr.decode()}")
        return p

    return run
