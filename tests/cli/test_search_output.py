"""``kbctl search``'s output as a user and an agent read it: through a pipe, on a narrow terminal,
and its notes (the search QA pass of docs/hardening.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture
def support(kb_home, tenant):
    """The sample corpus's support articles (hash-384) in this test's tenant, and a shell
    environment that reaches them."""
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    env.pop("PYTHONUNBUFFERED", None)  # buffered, as a cron job's stdout is
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbctl",
            "-p",
            "hash-384",
            "ingest",
            "sample_corpus/support",
            "-n",
            "sup",
            "--no-verify",
        ],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr.decode()
    return env


@pytest.mark.parametrize(
    "args",
    [
        "",  # the table
        "--format markdown",
        "--format context --budget 100000",
        "--explain",
    ],
)
def test_a_reader_that_leaves_early_is_not_an_error_in_any_format(support, args):
    """``kbctl search … | head -1`` under ``set -o pipefail``: rich's console answered the closed
    pipe with exit 1 (its ``on_broken_pipe``) where the JSON formats exit 0 (``kbctl.cli.main``).
    Every page here is larger than a pipe's buffer, so kbctl is still writing when head leaves."""
    cmd = f"{sys.executable} -m kbctl search '' -f source_type=markdown -n sup -k 1000 {args} | head -1"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=support, cwd=ROOT, timeout=300)
    assert p.stdout.strip(), p.stderr.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert b"Traceback" not in p.stderr and b"Exception ignored" not in p.stderr
