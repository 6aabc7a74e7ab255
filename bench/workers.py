"""Ingest workers: one run in one process against 1 and 2 worker processes, and the work queue's
health while a long transaction is open elsewhere.

1. A corpus of Markdown files made from sample_corpus/'s paragraphs (``FILES`` of them, a few
   paragraphs each; a smoke pass makes a few). Each configuration ingests it into its own tenant,
   so the embed cache (shared by a tenant's namespaces) never spares one the model's work:
   ``kbctl ingest`` in one process, then ``--workers 1`` and ``--workers 2`` (the coordinator
   and its local ``kbctl worker`` processes) with the default profile; then one process and
   ``--workers 2`` with the ``hash-384`` profile, whose embedding costs next to nothing: what the
   rest of the path (extract, chunk, the serialized writes) allows. Wall time of the command,
   the run's own seconds, chunks/s, and the load average over the run (the machine is shared).
2. The queue alone (no ingest): ``QUEUE_ITEMS`` items enqueued, then claimed ``BATCH`` at a time and
   settled by one client as fast as it can, first with nothing else open, then while another
   connection holds a transaction open (a REPEATABLE READ snapshot, as a long report or a
   re-embed's batch would): claims/s over the first and last quarter of the items, and the dead
   row versions of ``kbctl.run_items`` (``pg_stat_user_tables``) and its size at the end; and, to
   show what the worker's position (``floor``) is for, the same claimed from the run's first item
   each time, with the transaction open. Each row is its own run in the same table, one after the
   other: the dead versions, updates and bytes are what the row added.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

from common import REPO, Env, fresh_home, kbctl, md_table, save_json

FILES = 300
SMOKE_FILES = 12
QUEUE_ITEMS = 20_000
SMOKE_QUEUE_ITEMS = 400
BATCH = 8


def _corpus(folder: Path, files: int) -> Path:
    """``files`` Markdown files of 4 paragraphs each from sample_corpus/ (cycled, numbered so each differs)."""
    paras = []
    for path in sorted(p for p in (REPO / "sample_corpus").rglob("*") if p.suffix in (".md", ".txt")):
        for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            text = " ".join(para.split())
            if len(text) >= 80 and not text.startswith("#"):
                paras.append(text)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i in range(files):
        body = "\n\n".join(f"{paras[(4 * i + k) % len(paras)]} (note {i}.{k})" for k in range(4))
        (folder / f"note-{i:04d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    return folder


def _ingest(env: Env, home: Path, corpus: Path, tenant: str, workers: int | None, profile: str | None = None) -> dict:
    args = ["--tenant", tenant, "ingest", str(corpus), "-n", "notes", "--json", "--no-verify"]
    if profile:
        args += ["-p", profile]
    if workers is not None:
        args += ["--workers", str(workers)]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    report = json.loads(kbctl(env, *args, home=home).stdout)
    wall = time.perf_counter() - t0
    chunks = report["chunks"]["embedded"] + report["chunks"]["reused"]
    return {
        "configuration": ("one process" if workers is None else f"--workers {workers}")
        + (f", {profile}" if profile else ""),
        "documents": report["documents"]["new"],
        "chunks": chunks,
        "wall s": wall,
        "run s": float(report["seconds"]),
        "chunks/s (run)": chunks / float(report["seconds"]),
        "load before": load0,
        "load after": os.getloadavg()[0],
    }


def _queue(home: Path, items: int, long_transaction: bool, floor: bool = True) -> dict:
    """Claim and settle ``items`` queued items ``BATCH`` at a time (see the module's docstring)."""
    import psycopg

    import kbctl as kb_mod
    from kbctl.store import queue, runs

    kb = kb_mod.open(home=home, tenant="queue", profile="hash-384")
    holder = None
    try:
        name = ("long" if long_transaction else "quiet") + ("" if floor else "_nofloor")
        ns = kb.create_namespace(name, "hash-384")  # a write: makes the tenant on its first use
        conn = kb.connection()
        run_id = runs.start_run(conn, ns, "ingest", {})
        n = 0
        while n < items:
            n = queue.enqueue(
                conn, ns, run_id, n, [(f"/nowhere/{i}.md", f"{i}.md") for i in range(n, min(items, n + 1000))]
            )
        before = _table_stats(kb, conn, vacuum=True)
        if long_transaction:
            holder = psycopg.connect(kb.dsn(), autocommit=False)
            holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT count(*) FROM kbctl.profiles").fetchone()  # the snapshot is taken: xmin held
        rates = []
        at, done, t0, mark = 0, 0, time.perf_counter(), 0
        quarter = items // 4
        with runs.namespace_lock(conn, ns):  # claims need the coordinator's lock held
            while True:
                got = queue.claim(conn, ns.id, run_id, "bench", BATCH, 60.0, at)
                if not got:
                    break
                at = got[-1].item + 1 if floor else 0
                queue.settle(conn, ns, run_id, "bench", [c.item for c in got], [], {"documents": {"new": len(got)}})
                done += len(got)
                if done - mark >= quarter:
                    now = time.perf_counter()
                    rates.append((done - mark) / (now - t0))
                    t0, mark = now, done
        after = _table_stats(kb, conn)
        runs.finish_run(conn, ns, run_id, "ok", {})
    finally:
        if holder is not None:
            holder.rollback()
            holder.close()
        kb.close()
    return {
        "while": ("a transaction open elsewhere" if long_transaction else "nothing else open")
        + ("" if floor else ", claims read from the run's first item"),
        "items": items,
        "claims/s, first quarter": rates[0] / BATCH if rates else None,
        "claims/s, last quarter": rates[-1] / BATCH if rates else None,
        "items/s overall": sum(rates) / len(rates) if rates else None,
        "dead row versions": after[0] - before[0],
        "HOT updates": f"{after[1] - before[1]}/{after[2] - before[2]}",
        "table MB": (after[3] - before[3]) / 2**20,
    }


def _table_stats(kb, conn, vacuum: bool = False) -> tuple[int, int, int, int]:
    """kbctl.run_items's dead row versions, HOT and all updates, and bytes, once ``conn`` (the
    client's connection, which made the updates) has flushed its statistics; with ``vacuum``, the
    table vacuumed first (the previous row's dead versions gone: autovacuum would take them mid-row)."""
    import psycopg

    conn.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(1.0)  # flushed at the end of that statement's transaction, read by the owner's
    with psycopg.connect(kb.dsn(), autocommit=True) as owner:
        if vacuum:
            owner.execute("VACUUM kbctl.run_items")
            owner.execute("SELECT pg_stat_force_next_flush()")
            time.sleep(1.0)
        row = owner.execute(
            "SELECT n_dead_tup, n_tup_hot_upd, n_tup_upd, pg_total_relation_size(relid) FROM pg_stat_user_tables"
            " WHERE schemaname = 'kbctl' AND relname = 'run_items'"
        ).fetchone()
    return tuple(int(v) for v in row)  # type: ignore[return-value]


def run(env: Env) -> str:
    """The workers section of docs/benchmarks.md."""
    home = fresh_home(env, "-workers")
    kbctl(env, "db", "migrate", home=home)
    try:
        corpus = _corpus(home.parent / (home.name + "-corpus"), env.pick(FILES, SMOKE_FILES))
        warm = _corpus(home.parent / (home.name + "-warm"), 2)
        _ingest(env, home, warm, "w_warm", None)  # the model's one-time export and backend decision, untimed
        rows = [
            _ingest(env, home, corpus, "w_one", None),
            _ingest(env, home, corpus, "w_1", 1),
            _ingest(env, home, corpus, "w_2", 2),
            # the model out of the way (hash-384 embeds at memory speed): what the rest of the path,
            # the writes above all, allows
            _ingest(env, home, corpus, "h_one", None, "hash-384"),
            _ingest(env, home, corpus, "h_2", 2, "hash-384"),
        ]
        items = env.pick(QUEUE_ITEMS, SMOKE_QUEUE_ITEMS)
        qrows = [_queue(home, items, False), _queue(home, items, True), _queue(home, items, True, floor=False)]
    finally:
        kbctl(env, "db", "stop", home=home, check=False)
    save_json(env, "workers", {"ingest": rows, "queue": qrows})
    for r in rows:
        base = rows[3 if "hash" in r["configuration"] else 0]["chunks/s (run)"]
        r["vs one process"] = r["chunks/s (run)"] / base
    body = md_table(
        rows,
        [
            "configuration",
            "documents",
            "chunks",
            "wall s",
            "run s",
            "chunks/s (run)",
            "vs one process",
            "load before",
            "load after",
        ],
        digits=2,
    )
    body += "\n" + md_table(qrows, digits=1)
    print(body)
    return body
