"""Ingest throughput: SciFact end to end against the model alone on the same chunks, then an unchanged re-import.

1. A fresh home (its own embedded server, so the embedding cache is empty): ``kbctl db migrate``
   starts the server first, so the timed import does not include initdb, and the profile is
   prepared (``kbctl.embed.prepare``: the ``auto`` decision, measured once per machine).
2. Two rounds, alternating so that both sides see the same load on a shared machine::

       import → model only → (namespace deleted) import → model only

   ``import`` is ``kbctl eval import scifact -n scifact --json``, timed as a process (Python start,
   model load, fetch → extract → chunk → embed → store → verify); the run's own ``seconds`` are
   reported too, and the backend its model ran on (the report's ``embedder``). ``model only`` is
   the same chunk texts (what the model read: header + text, read back from the store) in **one**
   ``embed_documents`` call of ``get_embedder(profile)`` (purpose ``throughput``, the backend ingest
   loads), after the model is loaded: the embedder sorts them all by length and batches them its
   best way. Its backend must be the one the import ran on, else the ratio compares two models.
3. CPU: the import's process and the embedded server's (user + system seconds) against the model
   alone's, so "CPU outside the model" is measured, not inferred; the load average is recorded with
   every figure.
4. The same import again, unchanged: every source is skipped before extraction.

``--ingest-docs N`` imports the first N documents of the collection (the issue's 1,500); default all.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from pathlib import Path

from common import Env, fresh_home, kbctl, md_table, save_json, verdict

NAMESPACE = "scifact"
TARGET = 0.9  # end to end / model only, on a quiet machine (issue 22 part 6)


def _subset(env: Env, home: Path) -> Path:
    """The collection, or its first ``env.ingest_docs`` documents written next to the home (never in the repo)."""
    path = env.collection("scifact")
    if not env.ingest_docs:
        return path
    out = home.parent / (home.name + "-corpus")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with (
        (path / "corpus.jsonl").open(encoding="utf-8") as src,
        (out / "corpus.jsonl").open("w", encoding="utf-8") as dst,
    ):
        for n, line in enumerate(src):
            if n >= env.ingest_docs:
                break
            dst.write(line)
    return out


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _server_cpu(home: Path) -> float:
    """User + system seconds of the home's embedded server and its exited backends (Linux /proc; 0 elsewhere)."""
    try:
        pm = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in [pm, *(int(p) for p in os.listdir("/proc") if p.isdigit())]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if pid == pm:
                total += sum(int(x) for x in fields[11:15])  # its own and its reaped children's
            elif int(fields[1]) == pm:
                total += sum(int(x) for x in fields[11:13])
        return total / tick
    except (OSError, ValueError):
        return 0.0


def _import(env: Env, home: Path, path: Path) -> dict:
    """One timed ``kbctl eval import``: its report, wall seconds, CPU (process, server) and load."""
    load = os.getloadavg()[0]
    cpu0, pg0, t0 = _children_cpu(), _server_cpu(home), time.perf_counter()
    out = kbctl(env, "eval", "import", str(path), "-n", NAMESPACE, "--json", home=home).stdout
    wall = time.perf_counter() - t0
    time.sleep(0.5)  # the server reaps the import's backends
    report = json.loads(out)
    return {
        "report": report,
        "wall": wall,
        "cpu": _children_cpu() - cpu0,
        "server_cpu": _server_cpu(home) - pg0,
        "load": load,
        "load_end": os.getloadavg()[0],
        "backend": report.get("embedder"),
    }


def _chunk_texts(home: Path) -> tuple[object, list[str]]:
    """The profile of the namespace and what its model read for each chunk (header + text)."""
    import kbctl as kb_mod
    from kbctl.chunk import embed_text

    kb = kb_mod.open(home=home)
    try:
        prof = kb.profile_for(NAMESPACE)
        ns = kb.namespace(NAMESPACE)
        rows = (
            kb.connection()
            .execute(
                "SELECT d.title, c.heading_path, c.text, c.content_hash FROM kbctl.chunks c JOIN kbctl.documents d"
                " ON d.namespace_id = c.namespace_id AND d.id = c.document_id WHERE c.namespace_id = %s ORDER BY c.id",
                (ns.id,),
            )
            .fetchall()
        )
    finally:
        kb.close()
    return prof, [embed_text(t, title, tuple(hp), h) for title, hp, t, h in rows]


def _embed_only(prof, texts: list[str]) -> dict:
    """The model alone: every text in one ``embed_documents`` call (it sorts and batches them its best way)."""
    from kbctl.embed import backend_name, get_embedder

    emb = get_embedder(prof, purpose="throughput")  # what ingest loads
    emb.embed_documents(texts[:8])  # load the model and warm up
    load = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    emb.embed_documents(texts)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "chunks": len(texts),
        "seconds": secs,
        "chunks_per_s": len(texts) / secs,
        "cpu": cpu,
        "load": load,
        "load_end": os.getloadavg()[0],
        "backend": backend_name(emb),
    }


def _prepare(home: Path) -> None:
    """The profile made ready on this machine (the ``auto`` decision measured, the ONNX export written),
    once and before anything is timed, as a first ``kbctl ingest`` would."""
    import kbctl as kb_mod
    from kbctl.embed import prepare

    kb = kb_mod.open(home=home)
    try:
        prepare(kb.profile_for(NAMESPACE))
    finally:
        kb.close()


def _delete_namespace(home: Path) -> None:
    """Empty the store (and so the embedding cache) for the next round."""
    import kbctl as kb_mod

    kb = kb_mod.open(home=home)
    try:
        kb.delete_namespace(NAMESPACE)
    finally:
        kb.close()


def run(env: Env) -> str:
    """The ingest table for docs/benchmarks.md."""
    home = fresh_home(env, "-ingest")
    kbctl(env, "db", "migrate", home=home)
    path = _subset(env, home)
    _prepare(home)
    imports, models = [], []
    try:
        for r in range(env.pick(2, 1)):
            if r:
                _delete_namespace(home)
            imports.append(_import(env, home, path))
            prof, texts = _chunk_texts(home)
            models.append(_embed_only(prof, texts))
        t0 = time.perf_counter()
        second = json.loads(kbctl(env, "eval", "import", str(path), "-n", NAMESPACE, "--json", home=home).stdout)
        wall2 = time.perf_counter() - t0
    finally:
        kbctl(env, "db", "stop", home=home, check=False)
    for imp, mod in zip(imports, models):
        if imp["backend"] != mod["backend"]:
            raise SystemExit(
                f"the import embedded with {imp['backend']} but the model-only baseline loaded {mod['backend']}:"
                " the ratio would compare two backends"
            )
    rows, ratios = [], []
    for r, (imp, mod) in enumerate(zip(imports, models), 1):
        rep = imp["report"]
        chunks = rep["chunks"]["embedded"] + rep["chunks"]["reused"]
        e2e_wall, e2e_run = chunks / imp["wall"], chunks / float(rep["seconds"])
        ratios.append((e2e_wall / mod["chunks_per_s"], e2e_run / mod["chunks_per_s"]))
        rows += [
            {
                "round": r,
                "what": "import, whole process (wall)",
                "chunks": chunks,
                "seconds": imp["wall"],
                "chunks/s": e2e_wall,
                "vs model only": ratios[-1][0],
                "CPU s (kbctl + server)": f"{imp['cpu']:.0f} + {imp['server_cpu']:.0f}",
                "load": f"{imp['load']:.1f}→{imp['load_end']:.1f}",
            },
            {
                "round": r,
                "what": "import, ingest run (report.seconds)",
                "chunks": chunks,
                "seconds": float(rep["seconds"]),
                "chunks/s": e2e_run,
                "vs model only": ratios[-1][1],
                "CPU s (kbctl + server)": None,
                "load": None,
            },
            {
                "round": r,
                "what": f"model only, same chunks, one call ({mod['backend']})",
                "chunks": mod["chunks"],
                "seconds": mod["seconds"],
                "chunks/s": mod["chunks_per_s"],
                "vs model only": 1.0,
                "CPU s (kbctl + server)": f"{mod['cpu']:.0f}",
                "load": f"{mod['load']:.1f}→{mod['load_end']:.1f}",
            },
        ]
    first = imports[0]
    rows.append(
        {
            "round": None,
            "what": "re-import unchanged, whole process (wall)",
            "chunks": second["chunks"]["embedded"],
            "seconds": wall2,
            "chunks/s": None,
            "vs model only": None,
            "CPU s (kbctl + server)": None,
            "load": None,
        }
    )
    save_json(
        env,
        "ingest",
        {"imports": imports, "embed_only": models, "second": second, "wall2": wall2, "docs": env.ingest_docs},
    )
    cols = ["round", "what", "chunks", "seconds", "chunks/s", "vs model only", "CPU s (kbctl + server)", "load"]
    body = md_table(rows, cols, digits=2)
    best = max(w for w, _ in ratios)
    reimport = wall2 / first["wall"]
    body += (
        f"\n{first['report']['documents']['new']} documents,"
        f" backend {first['backend']} on both sides. End-to-end / model only (wall): "
        + ", ".join(f"{w:.3f}" for w, _ in ratios)
        + " (run seconds: "
        + ", ".join(f"{r:.3f}" for _, r in ratios)
        + f") — target ≥ {TARGET} on a quiet machine → {verdict(env, best >= TARGET)} in"
        f" {sum(w >= TARGET for w, _ in ratios)} of {len(ratios)} rounds. Unchanged re-import: {wall2:.1f} s wall ="
        f" {100 * reimport:.1f}% of the first import — target < 5% → {verdict(env, reimport < 0.05)}.\n"
    )
    print(body)
    return body
