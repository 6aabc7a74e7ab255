"""kbctl benchmarks (``make bench``): quality, lexical parity, dense recall, latency, ingest.

    python bench/run.py                        # every part, figures written into docs/
    python bench/run.py --only quality,sweep   # some parts
    python bench/run.py --no-write             # print the tables only
    python bench/run.py --smoke                # every part at tiny sizes, fresh home, no evaldata (CI)
    python bench/run.py --only latency --scale 2000,5000 --queries 50   # a quick look at one part

Collections are read from ``--evaldata`` (default ``../shared/evaldata`` relative to the repo),
never copied into the repository. A part that reads a collection's namespace imports it first when
missing (``kbctl eval import``), so every part runs on a fresh home, alone or after the others.
``--smoke`` runs every part at tiny sizes on collections made from sample_corpus/ (bench/smoke.py),
in a fresh temporary home, writes nothing to docs/, and exits 1 when a part fails: ``make
bench-smoke``, run by ``.ci/run``. The store is a dedicated home (``--home``, default
/tmp/kbctl-bench) whose embedded server is stopped at the end. Parts:

- ``quality``: ``kbctl eval import`` + ``kbctl eval run`` on SciFact, Cranfield, CISI
  → docs/retrieval-quality.md and the README's "Retrieval quality"
- ``sweep``:   hybrid fusion settings on SciFact and Cranfield → docs/retrieval-quality.md
- ``small``:   plain hybrid against the default (bounded feedback) on sub-collections of Cranfield and
  SciFact of 100, 300 and 1,000 documents, three draws each → docs/retrieval-quality.md
- ``parity``:  kbctl's BM25 lane against bm25s on the same tokens → docs/benchmarks.md
- ``dense``:   HNSW vs exact top-10 agreement, unfiltered and 5%-filtered → docs/benchmarks.md
- ``latency``: search p50/p95 per mode at 10k and 100k chunks, cold CLI call → docs/benchmarks.md
- ``ingest``:  end-to-end chunks/s vs the model alone on the same chunks (alternating rounds, with the
  load average), unchanged re-import → docs/benchmarks.md (``--ingest-docs N``: the first N documents)
- ``cold``:    cold ``kbctl search`` wall time and peak memory per backend decision, and its breakdown
  → docs/benchmarks.md (the sample corpus only: needs no collection)
- ``memory``:  peak RSS and time of ``kbctl ingest`` on 1–45 MB text files and a 100k-entry feed
  → docs/benchmarks.md (inputs made at run time: needs no collection)
- ``serve``:   ``kbctl search`` through a running ``kbctl serve``, served against in-process search, and
  a 16-client load test → docs/benchmarks.md (the sample corpus only)
- ``verify``:  ``verify_claim``'s evidence flag calibrated on SciFact's claims (needs the ``scifact``
  namespace of ``quality``) → docs/benchmarks.md, docs/agents.md
- ``research``: ``research_topic`` against plain search, relevant documents within a token budget on
  CISI and Cranfield (needs their namespaces) → docs/benchmarks.md, docs/agents.md
- ``workers``: one ingest run in one process against ``--workers 1`` and ``--workers 2``, and the work
  queue's claims/s and dead rows with a transaction held open elsewhere → docs/benchmarks.md
- ``prf``:     the feedback step's cost: hybrid with and without ``prf`` at 10k and 100k chunks, with
  the load average → docs/benchmarks.md
- ``tracing``: OpenTelemetry traces' cost: hybrid with tracing off and on, query by query, at the
  scaled namespaces, with the load average → docs/benchmarks.md (needs ``kbctl[otel]``)
- ``million``: a synthetic namespace of a million chunks (bench/synth.py): build time, disk, memory,
  HNSW recall (vector, halfvec), p50/p95 of each lane → docs/benchmarks.md (needs no collection;
  ``KBCTL_BENCH_MILLION=N`` for another size)
- ``lexical``: the lexical lane packed (block-max) against every posting, query by query, and whether
  their top 100 agree, at SciFact, 10k, 100k (and the million with ``KBCTL_BENCH_MILLION_HOME``)
  → docs/benchmarks.md
- ``changed``: an mbox of 10,000 messages imported, then imported again after each of three appended
  messages: what a changed source writes → docs/benchmarks.md (inputs made at run time)
- ``filters``: metadata equality filters through ``kbctl.metadata_values`` against the plain reading
  at 100,000 synthetic chunks, the migration's fill, ingest with the index's trigger and without
  (bench/metadata_filters.py) → docs/benchmarks.md (inputs made at run time)

Parts that read no collection (``NO_COLLECTION``) run without ``--evaldata``; a run stops the
embedded servers of the homes its parts used only (parts with a home of their own, ``OWN_HOME``,
leave ``--home``'s alone).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, Env, kbctl, machine, write_section

PARTS = (
    "quality",
    "sweep",
    "small",
    "parity",
    "dense",
    "latency",
    "ingest",
    "cold",
    "memory",
    "serve",
    "verify",
    "research",
    "prf",
    "tracing",
    "million",
    "lexical",
    "workers",
    "changed",
    "filters",
)
# Where each part's figures go (between <!-- bench:PART --> markers); quality is in the README too.
DOCS = {
    "quality": ("docs/retrieval-quality.md", "README.md"),
    "sweep": ("docs/retrieval-quality.md",),
    "small": ("docs/retrieval-quality.md",),
    "parity": ("docs/benchmarks.md",),
    "dense": ("docs/benchmarks.md",),
    "latency": ("docs/benchmarks.md",),
    "ingest": ("docs/benchmarks.md",),
    "cold": ("docs/benchmarks.md",),
    "memory": ("docs/benchmarks.md",),
    "serve": ("docs/benchmarks.md",),
    "verify": ("docs/benchmarks.md", "docs/agents.md"),
    "research": ("docs/benchmarks.md", "docs/agents.md"),
    "prf": ("docs/benchmarks.md",),
    "tracing": ("docs/benchmarks.md",),
    "million": ("docs/benchmarks.md",),
    "lexical": ("docs/benchmarks.md",),
    "workers": ("docs/benchmarks.md",),
    "changed": ("docs/benchmarks.md",),
    "filters": ("docs/benchmarks.md",),
}
# Parts that read no research collection (their inputs are made at run time or are the sample
# corpus): they run from a fresh clone, with nothing under --evaldata.
NO_COLLECTION = frozenset({"cold", "memory", "serve", "million", "workers", "changed", "filters"})
# Parts that keep their store in a home of their own (--home with this suffix), not in --home itself.
OWN_HOME = {
    "cold": "-cold",
    "ingest": "-ingest",
    "memory": "-memory",
    "changed": "-changed",
    "workers": "-workers",
    "filters": "-filters",
}


def _part(name: str):
    import changed
    import cold
    import dense
    import ingest
    import latency
    import lexical
    import memory
    import metadata_filters
    import million
    import parity
    import quality
    import research
    import serve
    import tracing
    import verify_claim
    import workers

    return {
        "quality": quality.run,
        "sweep": quality.sweep,
        "small": quality.small,
        "parity": parity.run,
        "dense": dense.run,
        "latency": latency.run,
        "ingest": ingest.run,
        "cold": cold.run,
        "memory": memory.run,
        "serve": serve.run,
        "verify": verify_claim.run,
        "research": research.run,
        "prf": latency.run_prf,
        "tracing": tracing.run,
        "million": million.run,
        "lexical": lexical.run,
        "workers": workers.run,
        "changed": changed.run,
        "filters": metadata_filters.run,
    }[name]


SMOKE_SCALE = (300, 600)  # chunks of the two scaled namespaces in a smoke pass
SMOKE_QUERIES = 5  # queries (claims, topics) per collection in a smoke pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--evaldata",
        type=Path,
        default=REPO.parent / "shared" / "evaldata",
        help="folder of BEIR collections (default ../shared/evaldata; not read with --smoke)",
    )
    ap.add_argument(
        "--home",
        type=Path,
        default=None,
        help="KBCTL_HOME for the benchmark store (default /tmp/kbctl-bench; with --smoke a fresh temporary one)",
    )
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma list of parts: {', '.join(PARTS)}")
    ap.add_argument("--no-write", action="store_true", help="print the tables, leave docs/ alone")
    ap.add_argument("--keep-running", action="store_true", help="leave the embedded server running")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="every part at tiny sizes on collections made from sample_corpus/ in a fresh home: shows that each"
        " part runs (writes nothing to docs/; exit 1 when a part fails)",
    )
    ap.add_argument(
        "--scale",
        default=None,
        help="chunk counts of the two scaled namespaces of dense, latency and prf (default 10000,100000)",
    )
    ap.add_argument("--queries", type=int, default=None, help="at most this many queries per collection")
    ap.add_argument(
        "--ingest-docs", type=int, default=None, help="ingest imports the first N documents of SciFact (default all)"
    )
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    scale = SMOKE_SCALE if args.smoke else (10_000, 100_000)
    if args.scale:
        try:
            small, large = (int(x) for x in args.scale.split(","))
        except ValueError:
            ap.error("--scale takes two chunk counts, e.g. 2000,5000")
        scale = (small, large)
    queries = args.queries or (SMOKE_QUERIES if args.smoke else None)
    if not args.smoke:
        if not NO_COLLECTION.issuperset(parts) and not (args.evaldata / "scifact" / "corpus.jsonl").exists():
            ap.error(f"no collections under {args.evaldata} (pass --evaldata, or --smoke)")
        env = Env(
            args.evaldata.resolve(),
            (args.home or Path("/tmp/kbctl-bench")).resolve(),
            scale=scale,
            queries=queries,
            ingest_docs=args.ingest_docs,
        )
        return _run(env, parts, write=not args.no_write, keep=args.keep_running)
    import smoke

    with tempfile.TemporaryDirectory(prefix="kbctl-bench-smoke-") as tmp:
        evaldata = smoke.make_collections(Path(tmp) / "evaldata")
        home = args.home or Path(tmp) / "home"
        # one model cache for the parts' homes: each profile's backends are measured once a pass
        os.environ.setdefault("KBCTL_MODEL_CACHE", str(Path(tmp) / "models"))
        env = Env(
            evaldata.resolve(), home.resolve(), smoke=True, scale=scale, queries=queries, ingest_docs=args.ingest_docs
        )
        return _run(env, parts, write=False, keep=False)


def _run(env: Env, parts: list[str], *, write: bool, keep: bool) -> int:
    """Run ``parts`` in order; a part that fails is reported and the others go on; 1 if any failed."""
    failed, took = [], {}
    try:
        for name in parts:
            print(f"\n== {name}", flush=True)
            t0 = time.perf_counter()
            try:
                body = _part(name)(env)
            except (Exception, SystemExit) as e:  # a part that stops working is reported, the others go on
                if not env.smoke:
                    raise
                failed.append(name)
                print(f"!! part {name} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                traceback.print_exc()
                continue
            finally:
                took[name] = time.perf_counter() - t0
            if env.smoke:
                print(body, flush=True)
            stamp = f"_Measured {machine()}; part took {took[name]:.0f} s (`python bench/run.py --only {name}`)._\n\n"
            if write:
                for doc in DOCS[name]:
                    write_section(REPO / doc, name, stamp + body)
    finally:
        if not keep:  # the homes of the parts run (one that failed may have left its server up), no other:
            # another run may be using the main home while a part of its own home runs alone
            homes = {env.home.parent / (env.home.name + OWN_HOME[p]) if p in OWN_HOME else env.home for p in parts}
            for home in sorted(homes):
                if home.exists():
                    kbctl(env, "db", "stop", home=home, check=False)
    if env.smoke:
        print("\nsmoke pass, seconds per part (load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + "):")
        for name, secs in took.items():
            print(f"  {name:<10} {secs:6.1f}  {'FAILED' if name in failed else 'ok'}")
        print(f"bench smoke: {len(parts) - len(failed)} of {len(parts)} parts ran, {sum(took.values()):.0f} s in all")
        if failed:
            print(f"bench smoke: parts that failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
