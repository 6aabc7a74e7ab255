"""SIGKILL of ``kbctl ingest`` at chosen points of a re-ingest, then a rerun that converges.

``test_orchestrator`` and ``test_ingest`` kill a first ingest once documents are stored, at whatever
point the poll sees. Here the process kills itself (``os.kill(getpid(), SIGKILL)``, no handler can
run) at a chosen point of a run that *replaces* every document of a namespace: after fetching a few
sources (nothing stored), while embedding the second batch (the first one stored), and inside the
second batch's store transaction (old chunks deleted, new ones copied, not committed). Each time:
no document is half replaced (all of its chunks of one version, as many as it declares), the rerun
converges to the store a clean ingest of the new version builds, no URI twice, and the killed run is
marked ``interrupted`` in ``kbctl runs``.

Disk full: a separate embedded server on a small tmpfs, when this machine lets the test mount one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

N = 200  # notes: four batches of 64 documents

_KILLER = r"""
import importlib, os, signal, sys

target, after, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
module, _, attr = target.partition(":")
owner = importlib.import_module(module)
*path, name = attr.split(".")
for p in path:
    owner = getattr(owner, p)
orig = getattr(owner, name)
calls = [0]

def hooked(*a, **k):
    calls[0] += 1
    if calls[0] > after:
        os.kill(os.getpid(), signal.SIGKILL)
    return orig(*a, **k)

setattr(owner, name, hooked)
from kbctl.cli.main import main
main(argv)
"""

POINTS = {
    "after-fetch": ("kbctl.ingest.producer:extract_source", 5),  # the sixth source fetched: nothing stored yet
    "mid-embed": ("kbctl.ingest.embedding:Embedding.embed", 1),  # embedding the second batch: the first is stored
    "mid-store": ("kbctl.store.documents:_write_postings", 1),  # inside the second batch's transaction
}


def _notes(root: Path, version: int, salt: str = "") -> Path:
    """``N`` notes; version 2 changes every one (other words, another number of paragraphs).

    Vectors are shared by all namespaces of a profile: ``salt`` keeps a test's texts its own."""
    root.mkdir(parents=True, exist_ok=True)
    words = "lantern harbour ledger ferry quartz meadow signal copper orchard tunnel beacon canyon glacier".split()
    for i in range(N):
        paras = [
            f"ver{version} {salt} "
            + " ".join(words[(i * 7 + p * 5 + w * w + version) % len(words)] for w in range(50))
            + f" note{i}p{p}."
            for p in range(2 + version)
        ]
        (root / f"note{i:04d}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paras) + "\n")
    return root


def _documents(kb, ns: str) -> dict[str, tuple[int, list[str]]]:
    """Per document URI: the chunk count it declares and its chunks' texts in order."""
    rows = (
        kb.connection()
        .execute(
            "SELECT d.uri, d.chunk_count, array_remove(array_agg(c.text ORDER BY c.position), NULL)"
            " FROM kbctl.documents d LEFT JOIN kbctl.chunks c ON c.namespace_id = d.namespace_id AND c.document_id = d.id"
            " WHERE d.namespace_id = %s GROUP BY d.uri, d.chunk_count",
            (kb.namespace(ns).id,),
        )
        .fetchall()
    )
    return {u: (n, list(texts)) for u, n, texts in rows}


def _uris_twice(kb, ns: str) -> int:
    return (
        kb.connection()
        .execute(
            "SELECT count(*) - count(DISTINCT uri) FROM kbctl.documents WHERE namespace_id = %s", (kb.namespace(ns).id,)
        )
        .fetchone()[0]
    )


@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_at_a_point_of_a_replacement_then_the_rerun_converges(kb, kb_home, tenant, tmp_path, point):
    ns = "kill-" + point
    corpus = _notes(tmp_path / "notes", 1, point)
    assert kb.ingest([str(corpus)], namespace=ns, verify=False).documents["new"] == N
    before = _documents(kb, ns)
    _notes(corpus, 2, point)

    target, after = POINTS[point]
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLER,
            target,
            str(after),
            "-p",
            "hash-384",
            "ingest",
            str(corpus),
            "-n",
            ns,
            "--json",
        ],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr.decode()[-2000:])

    left = _documents(kb, ns)
    assert _uris_twice(kb, ns) == 0
    assert [r["status"] for r in kb.runs(ns)][:2] == ["running", "ok"]
    rerun = kb.ingest([str(corpus)], namespace=ns)
    # the clean reference only now: vectors are shared by the namespaces of a profile, so an earlier
    # one would leave the killed run nothing to embed
    clean = kb.ingest([str(corpus)], namespace="clean-" + point, verify=False)
    assert clean.documents["new"] == N
    reference = _documents(kb, "clean-" + point)

    # what the kill left: every document whole, of one version or the other, never both, never half
    assert set(left) == set(before)
    replaced = 0
    for uri, (declared, texts) in left.items():
        assert declared == len(texts), uri
        assert (declared, texts) in (before[uri], reference[uri]), uri
        replaced += (declared, texts) == reference[uri]
    assert replaced == {"after-fetch": 0, "mid-embed": 64, "mid-store": 64}[point]

    assert rerun.errors == [] and rerun.verify["ok"], rerun.to_json()
    assert rerun.documents["changed"] + rerun.documents["unchanged"] == N and rerun.documents["unchanged"] == replaced
    assert _documents(kb, ns) == reference and _uris_twice(kb, ns) == 0
    runs = json.loads(
        subprocess.run(
            [sys.executable, "-m", "kbctl", "runs", "-n", ns, "--json"],
            capture_output=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        ).stdout
    )
    assert [r["status"] for r in runs] == ["ok", "interrupted", "ok"]  # newest first


# -- disk full, for real: an embedded server on a small tmpfs -------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 192 MB tmpfs (root only); the test is skipped where it cannot be mounted."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8): the monkeypatched DiskFull tests in test_db_errors cover this")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192m,mode=1777", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs ({r.stderr.decode().strip()}): the monkeypatched DiskFull tests in test_db_errors cover this"
        )
    home = mnt / "home"
    home.mkdir()
    os.chmod(home, 0o777)
    try:
        yield mnt, home
    finally:
        from kbctl.config import load_settings
        from kbctl.store.db import Database

        try:
            Database(load_settings(overrides={"database.home": str(home)})).stop()
        finally:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int) -> Path:
    """A file taking all but ``leave`` bytes of the tmpfs."""
    st = os.statvfs(mnt)
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, max(1, st.f_bavail * st.f_frsize - leave))
    finally:
        os.close(fd)
    return filler


def test_disk_full_for_real_is_one_line_and_a_rerun_converges(small_disk, tmp_path):
    mnt, home = small_disk
    env = dict(os.environ, KBCTL_HOME=str(home), KBCTL_TENANT="disk", PYTHONWARNINGS="ignore")

    def kbctl(*args):
        return subprocess.run(
            [sys.executable, "-m", "kbctl", "-p", "hash-384", *args],
            capture_output=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )

    first = tmp_path / "first"
    first.mkdir()
    for i in range(3):
        (first / f"n{i}.md").write_text(f"# Note {i}\n\nA small note, number {i}, written before the disk fills.\n")
    p = kbctl("ingest", str(first), "-n", "disk", "--no-verify")
    if p.returncode != 0:
        pytest.skip(f"the embedded server does not start on a 192 MB tmpfs: {p.stderr.decode().strip()[-300:]}")
    big = tmp_path / "big"
    big.mkdir()
    words = "lantern harbour ledger ferry quartz meadow signal copper orchard tunnel beacon canyon glacier".split()
    for i in range(30):
        (big / f"big{i:03d}.md").write_text(
            f"# Big {i}\n\n"
            + "\n\n".join(
                " ".join(words[(i + p * 3 + w) % len(words)] for w in range(80)) + f" big{i}p{p}." for p in range(40)
            )
        )
    filler = _fill(mnt, 1 << 20)
    try:
        p = kbctl("ingest", str(big), "-n", "disk", "--no-verify")
        err = p.stderr.decode()
        assert p.returncode == 1 and "Traceback" not in err, err
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("WARNING")]
        assert lines and lines[0].startswith("error: ") and len(lines) <= 2, err
        assert "disk" in lines[0] or "went away" in lines[0] or "space" in lines[0], err
    finally:
        filler.unlink()
    p = kbctl("ingest", str(big), "-n", "disk", "--no-verify")
    assert p.returncode == 0, p.stderr.decode()
    import kbctl as lib

    with lib.open(home=home, tenant="disk") as kb:
        runs = kb.runs("disk")
        assert [r["status"] for r in runs][:2] == ["ok", "failed"], runs
        report = kb.verify("disk")
        assert report.ok and report.counts["documents"] == 3 + 30, report.to_json()
