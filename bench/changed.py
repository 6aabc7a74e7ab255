"""A changed source: an mbox archive that gains one message, imported again (no collection needed).

A mailing-list archive or a feed polled by cron changes by one item at a time; the whole source is
read again (its bytes changed), and what matters is what the store does with the documents that did
not change. Since session 39 they are left as stored (``ingest.writer._unchanged``): only the new
message is written. This part measures it:

1. a fresh home (its own embedded server), ``kbctl db migrate`` first so no timing includes initdb;
2. an mbox of N synthetic messages (each with a Message-ID, two chunks' worth of text) imported into
   namespace ``changed`` with the ``hash-384`` profile: the model is not what is measured (the
   re-import's vectors come from the cache either way), the store's writes are;
3. one message appended, the mbox imported again (``kbctl ingest … --json``, timed as a process),
   three times (a message more each time); the report says what was written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from common import Env, fresh_home, kbctl, md_table

NAMESPACE = "changed"


def _message(i: int) -> str:
    words = " ".join(f"term{(i * 7 + j) % 997} topic{i % 50}" for j in range(120))
    return (
        f"From s{i}@example.org Mon Oct 21 08:00:00 2024\nMessage-ID: <m{i}@bench.example.org>\n"
        f"From: Sender {i} <s{i}@example.org>\nSubject: Question {i}\nDate: Mon, 21 Oct 2024 08:00:00 +0000\n\n"
        f"{words}\n\n"
    )


def _ingest(env: Env, home: Path, folder: Path) -> dict:
    t0 = time.perf_counter()
    out = kbctl(env, "ingest", str(folder), "-n", NAMESPACE, "--profile", "hash-384", "--json", home=home)
    wall = time.perf_counter() - t0
    rep = json.loads(out.stdout)
    return {"wall": wall, "report": rep, "load": os.getloadavg()[0]}


def run(env: Env) -> str:
    """The changed-source table for docs/benchmarks.md."""
    n = env.pick(10_000, 200)
    home = fresh_home(env, "-changed")
    kbctl(env, "db", "migrate", home=home)
    folder = home.parent / (home.name + "-mail")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    box = folder / "list.mbox"
    rows = []
    try:
        with box.open("w") as f:
            f.writelines(_message(i) for i in range(n))
        runs = [("import", n, _ingest(env, home, folder))]
        for k in range(env.pick(3, 1)):
            with box.open("a") as f:
                f.write(_message(n + k))
            runs.append(("one message appended, imported again", n + k + 1, _ingest(env, home, folder)))
    finally:
        kbctl(env, "db", "stop", home=home, check=False)
        shutil.rmtree(folder, ignore_errors=True)
    for what, messages, r in runs:
        docs, chunks = r["report"]["documents"], r["report"]["chunks"]
        rows.append(
            {
                "what": what,
                "messages": messages,
                "seconds (process)": r["wall"],
                "run seconds": float(r["report"]["seconds"]),
                "new / changed / unchanged": f"{docs['new']} / {docs['changed']} / {docs['unchanged']}",
                "chunks embedded / reused": f"{chunks['embedded']} / {chunks['reused']}",
                "load": f"{r['load']:.1f}",
            }
        )
    return (
        md_table(rows, digits=2)
        + "\nThe re-import reads, extracts and chunks every message again (the mbox's bytes changed) and"
        " writes only the new one; the unchanged messages keep their rows, chunks, postings and vectors.\n"
    )
