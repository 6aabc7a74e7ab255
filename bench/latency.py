"""Search latency per mode at 10k and 100k chunks, in-process, plus one cold CLI call.

In-process: ``kbctl.open(home=…)`` then ``kb.search(q, ns, mode=…, k=10)`` for every SciFact test
query (default options: typo correction on, no reranking), after one warm-up query per mode so the
model is loaded and the connection open, after ``kbctl db optimize --reindex`` (the scaled
namespaces are bulk-copied; their B-tree pages are left half full, as after any large ingest), and
after the files of kbctl's tables and indexes have been
read once, so they are in the OS page cache as on a server that has been up for a while (a
freshly restarted machine otherwise measures its disk: 3.5 GB of benchmark store, mostly cold). Each figure is the wall time of the ``kb.search`` call:
query embedding, both lanes in PostgreSQL, fusion, shaping and citations.

Cold CLI: the wall time of one ``kbctl search`` process (Python start, imports, model load,
connection to the already-running embedded server, the query, rendering).
"""

from __future__ import annotations

import statistics
import subprocess
import time

from common import KBCTL, Env, ensure_imported, md_table, save_json, verdict
from scale import config_file, make_scaled, sizes

from kbctl.evals.metrics import percentile

# "hybrid": plain hybrid (prf = "off"); "default": hybrid as a search with no flags runs it (bounded
# feedback, prf = "rescore", where the lanes' agreement is in the band); "hybrid+prf": the quality
# mode (prf = "hybrid"): a second round of both lanes after the first.
MODES = ("lexical", "dense", "hybrid", "default", "hybrid+prf")
TARGET_P95_MS = 100.0


def measure(kb, namespace: str, queries: list[str], label: str) -> list[float]:
    """Each query's ``kb.search`` wall time in ms, after one warm-up query, for a mode of ``MODES``
    (``hybrid+prf``: two rounds; ``default``: the profile's own feedback; any other: without it)."""
    mode, opts = {
        "hybrid+prf": ("hybrid", {"prf": "hybrid"}),
        "default": ("hybrid", {}),  # the profile's own prf
    }.get(label, (label, {"prf": "off"}))
    kb.search(queries[0], namespace, mode=mode, k=10, **opts)  # warm-up
    out = []
    for q in queries:
        t0 = time.perf_counter()
        kb.search(q, namespace, mode=mode, k=10, **opts)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def summary(lat: list[float]) -> dict:
    """A latency table's columns of ``lat`` (ms): queries, p50, p95 and mean."""
    return {
        "queries": len(lat),
        "p50 ms": percentile(lat, 50),
        "p95 ms": percentile(lat, 95),
        "mean ms": statistics.fmean(lat),
    }


def warm_page_cache(kb) -> dict:
    """Read every file of the kbctl schema's tables, indexes and TOAST (the embedded store is local)."""

    conn = kb.connection()
    # The data directory is the embedded server's (``kb.db_status()`` reads it as the owner: the
    # connection acts as its tenant's role, which may not read the server's paths).
    data = kb.db_status().pgdata
    if data is None:
        return {"warmed_mb": 0, "seconds": 0.0, "note": "not embedded: the server's files are elsewhere"}
    rels = [
        r[0]
        for r in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relkind IN ('r', 'i', 't')"
            " AND (c.relnamespace = 'kbctl'::regnamespace OR c.oid IN (SELECT reltoastrelid FROM pg_class"
            "      WHERE relnamespace = 'kbctl'::regnamespace) OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN"
            "      (SELECT reltoastrelid FROM pg_class WHERE relnamespace = 'kbctl'::regnamespace)))"
        )
    ]
    t0, size = time.perf_counter(), 0
    for rel in filter(None, rels):
        for f in sorted(data.glob(rel + "*")):  # segments (.1, .2, …) and the free-space/visibility maps
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    size += len(chunk)
    return {"warmed_mb": round(size / 2**20), "seconds": round(time.perf_counter() - t0, 1)}


def cold_cli(env: Env, namespace: str, query: str, repeats: int) -> list[float]:
    """Wall seconds of ``kbctl search`` processes (each one a cold Python + model load)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(
            [
                KBCTL,
                "--home",
                str(env.home),
                "--config",
                str(config_file(env)),
                "search",
                query,
                "-n",
                namespace,
                "-k",
                "10",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - t0)
    return times


def prepare(kb, env: Env) -> list[dict]:
    """Make (or reuse) the scaled namespaces of SciFact, then ``kb.optimize(reindex=True)``: as the
    tables' owner, on the store's admin connection (the tenant's connection may not vacuum)."""
    infos = [make_scaled(kb, "scifact", name, size) for name, size in sizes(env).items()]
    t0 = time.perf_counter()
    kb.optimize(reindex=True)
    print(infos, f"optimize --reindex: {time.perf_counter() - t0:.1f} s", flush=True)
    return infos


def run(env: Env) -> str:
    """The latency table (and the cold CLI line) for docs/benchmarks.md."""
    import kbctl
    from kbctl.evals import load_dataset

    ensure_imported(env, "scifact")
    queries = env.few([q.text for q in load_dataset(env.collection("scifact")).queries])
    kb = kbctl.open(home=env.home, config=config_file(env))
    rows, raw = [], {}
    try:
        prepare(kb, env)
        for name, size in sizes(env).items():
            print(name, warm_page_cache(kb), flush=True)
            for mode in MODES:
                lat = measure(kb, name, queries, mode)
                raw[f"{name}/{mode}"] = lat
                rows.append({"chunks": f"{size:,}", "mode": mode, **summary(lat)})
                print(rows[-1], flush=True)
    finally:
        kb.close()
    large, size = list(sizes(env).items())[-1]
    cold = cold_cli(env, large, queries[0], env.pick(3, 1))
    save_json(env, "latency", {"rows": rows, "raw": raw, "cold_cli_s": cold})
    hybrid100 = next(r for r in rows if r["chunks"] == f"{size:,}" and r["mode"] == "hybrid")
    default100 = next(r for r in rows if r["chunks"] == f"{size:,}" and r["mode"] == "default")
    body = md_table(rows, ["chunks", "mode", "queries", "p50 ms", "p95 ms", "mean ms"], digits=1)
    body += (
        f"\nHybrid p95 at {size:,} chunks: {hybrid100['p95 ms']:.1f} ms plain, {default100['p95 ms']:.1f} ms as a"
        f" search with no flags runs it (target < {TARGET_P95_MS:.0f} ms →"
        f" {verdict(env, max(hybrid100['p95 ms'], default100['p95 ms']) < TARGET_P95_MS)}).\n\n"
        f"Cold `kbctl search` CLI call ({size:,}-chunk namespace, hybrid, server already running): "
        f"{', '.join(f'{t:.2f}' for t in cold)} s (median {statistics.median(cold):.2f} s).\n"
    )
    print(body)
    return body


# The feedback step's cost (part ``prf``): plain hybrid (no feedback, the default), bounded feedback
# (prf = "rescore": the first round's candidates scored again) and two full rounds (prf = "hybrid"),
# with the profile's own settings (configs/default.toml), query by query in turn so that all see the
# same load.
PRF_LABELS = ("hybrid", "rescore", "hybrid+prf")
PRF_OPTIONS = {"hybrid": {"prf": "off"}, "rescore": {"prf": "rescore"}, "hybrid+prf": {"prf": "hybrid"}}
PRF_RULE = 1.3  # feedback is the default only while its hybrid p95 at 100k stays within 1.3 times no feedback
QUIET_LOAD = 2.0  # 1-minute load average above which a run is labelled "under load": the part's own
# server and client keep it near 1.5 on 2 cores, so only more than the core count means other work


def _load() -> str:
    import os

    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def measure_prf(kb, namespace: str, queries: list[str], labels=PRF_LABELS, **options) -> dict[str, list[float]]:
    """Wall ms per query of each label's search, rotating which runs first."""
    opts = {label: {**PRF_OPTIONS[label], **options} for label in labels}
    for label in labels:  # warm-up
        kb.search(queries[0], namespace, mode="hybrid", k=10, **opts[label])
    out: dict[str, list[float]] = {label: [] for label in labels}
    applied = 0
    for i, q in enumerate(queries):
        turn = i % len(labels)
        for label in labels[turn:] + labels[:turn]:
            t0 = time.perf_counter()
            r = kb.search(q, namespace, mode="hybrid", k=10, **opts[label])
            out[label].append((time.perf_counter() - t0) * 1000)
            if label == "rescore":
                applied += bool((r.details.get("prf") or {}).get("applied"))
    out["applied"] = [applied]  # how many queries "rescore" gave feedback
    return out


def _prf_row(name: str, size: int, queries: int, lat: dict, loads: tuple) -> dict:
    plain, rescore, quality = (percentile(lat[label], 95) for label in PRF_LABELS)
    step = [b - a for a, b in zip(lat["hybrid"], lat["rescore"])]
    return {
        "chunks": f"{size:,}",
        "queries": queries,
        "hybrid (no feedback) p50 / p95 ms": f"{percentile(lat['hybrid'], 50):.1f} / {plain:.1f}",
        "rescore p50 / p95 ms": f"{percentile(lat['rescore'], 50):.1f} / {rescore:.1f}",
        "rescore's step p50 / p95 ms": f"{percentile(step, 50):+.1f} / {percentile(step, 95):+.1f}",
        "rescore p95 ratio": f"{rescore / plain:.2f}×",
        "feedback applied": f"{lat['applied'][0]} of {queries}",
        "two rounds (prf hybrid) p50 / p95 ms": f"{percentile(lat['hybrid+prf'], 50):.1f} / {quality:.1f}",
        "two rounds p95 ratio": f"{quality / plain:.2f}×",
        "load average before; after": f"{loads[0]}; {loads[1]}",
    }


def _million_prf(env: Env) -> dict | None:
    """The three at the synthetic million of part ``million``, when ``KBCTL_BENCH_MILLION_HOME`` holds
    it, after its files are read into the page cache (its queries are synthetic: a cost figure, not a
    quality one)."""
    import os

    home = os.environ.get("KBCTL_BENCH_MILLION_HOME")
    if not home or env.smoke:
        return None
    import million

    kb, name, size, qs = million.opened_with_queries(env, home)
    try:
        print(name, warm_page_cache(kb), flush=True)
        before = _load()
        lat = measure_prf(kb, name, qs)
        loads = (before, _load())
        off = _forward_off(kb, {name: size}, qs)
        return {"name": name, "size": size, "lat": lat, "loads": loads, "queries": len(qs), "off": off}
    finally:
        kb.close()


def run_prf(env: Env) -> str:
    """The default's feedback step at 10k and 100k chunks (the ``latency`` part's namespaces, made if
    missing) and at the million when ``KBCTL_BENCH_MILLION_HOME`` holds it, with the load average
    before and after each size: → docs/benchmarks.md."""
    import os

    import kbctl
    from kbctl.evals import load_dataset

    ensure_imported(env, "scifact")
    queries = env.few([q.text for q in load_dataset(env.collection("scifact")).queries])
    kb = kbctl.open(home=env.home, config=config_file(env))
    rows, raw, loads = [], {}, {}
    try:
        s = kb.profile_for(list(sizes(env))[-1]).search
        settings = (
            f"prf {s.prf}, candidates {s.candidates}, dense_weight {s.dense_weight}, prf_dense_weight "
            f"{s.prf_dense_weight}, prf_min_agreement {s.prf_min_agreement}, prf_max_agreement {s.prf_max_agreement}, "
            f"prf_docs {s.prf_docs}, prf_terms "
            f"{s.prf_terms}, prf_query_weight {s.prf_query_weight}, prf_vector_docs {s.prf_vector_docs}, "
            f"prf_vector_weight {s.prf_vector_weight}; quality mode: prf_candidates {s.prf_candidates}, "
            f"prf_max_postings {s.prf_max_postings}"
        )
        for name, size in sizes(env).items():
            make_scaled(kb, "scifact", name, size)
            print(name, warm_page_cache(kb), flush=True)
            before = _load()
            lat = measure_prf(kb, name, queries)
            loads[name] = (before, _load())
            raw[name] = lat
            rows.append(_prf_row(name, size, len(queries), lat, loads[name]))
            print(rows[-1], flush=True)
        off = _forward_off(kb, sizes(env), queries)
    finally:
        kb.close()
    last = rows[-1]
    big = _million_prf(env)
    if big is not None:
        loads[big["name"]] = big["loads"]
        raw[big["name"]] = big["lat"]
        rows.append(_prf_row(big["name"], 1_000_000, big["queries"], big["lat"], big["loads"]))
        rows[-1]["chunks"] += " (synthetic queries)"
        print(rows[-1], flush=True)
        off += big["off"]
        off[-1]["chunks"] += " (synthetic queries)"
    save_json(env, "latency-prf", {"rows": rows, "raw": raw, "loads": loads, "settings": settings, "forward_off": off})
    ratio = float(last["rescore p95 ratio"].rstrip("×"))
    loaded = max(float(loads[name][0].split(",")[0]) for name in loads) > QUIET_LOAD
    rule = verdict(env, ratio <= PRF_RULE, "within", "over")
    body = (
        f"Settings: the packaged profile ({settings}); {len(queries)} SciFact test queries, `k` = 10; plain hybrid "
        f'(`prf = "off"`), `prf = "rescore"` (the default) and `prf = "hybrid"` in turn, query by query. Load average (1, 5, 15 min) '
        f"from `os.getloadavg()` on {os.cpu_count()} cores.\n\n"
    )
    body += md_table(rows, list(rows[0]))
    body += (
        f"\nRescore's hybrid p95 at {last['chunks']} chunks: {last['rescore p95 ratio']} of plain hybrid (rule for a default: ≤ {PRF_RULE}× → {rule}"
        + (", measured under load: not a verdict" if loaded else "")
        + ").\n"
    )
    body += (
        "\nWith the forward indexes' cache off (`[cache] forward_mb = 0`: bounded feedback scores its candidates"
        " with the SQL statement), plain hybrid and rescore in turn again, after the runs above:\n\n"
        + md_table(off, list(off[0]))
    )
    print(body)
    return body


def _forward_off(kb, namespaces: dict[str, int], queries: list[str]) -> list[dict]:
    """Plain hybrid against rescore at each size with ``[cache] forward_mb = 0``, then the cache's
    limit restored: what an operator who turns the cache off pays."""
    import dataclasses

    from kbctl.search import memory

    rows = []
    memory.configure(**{**dataclasses.asdict(kb.settings.cache), "forward_mb": 0})
    try:
        for name, size in namespaces.items():
            before = _load()
            lat = measure_prf(kb, name, queries, labels=("hybrid", "rescore"))
            plain, rescore = percentile(lat["hybrid"], 95), percentile(lat["rescore"], 95)
            rows.append(
                {
                    "chunks": f"{size:,}",
                    "queries": len(queries),
                    "hybrid (no feedback) p50 / p95 ms": f"{percentile(lat['hybrid'], 50):.1f} / {plain:.1f}",
                    "rescore, forward_mb = 0, p50 / p95 ms": f"{percentile(lat['rescore'], 50):.1f} / {rescore:.1f}",
                    "p95 ratio": f"{rescore / plain:.2f}×",
                    "feedback applied": f"{lat['applied'][0]} of {len(queries)}",
                    "load average before; after": f"{before}; {_load()}",
                }
            )
            print(rows[-1], flush=True)
    finally:
        memory.configure(**dataclasses.asdict(kb.settings.cache))
    return rows
