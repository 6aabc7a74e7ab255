"""kbctl benchmarks (``make bench``): quality, lexical parity, dense recall, latency, ingest.

    python bench/run.py                        # every part, figures written into docs/
    python bench/run.py --only quality,sweep   # some parts
    python bench/run.py --no-write             # print the tables only

Collections are read from ``--evaldata`` (default ``../shared/evaldata`` relative to the repo),
never copied into the repository. The store is a dedicated home (``--home``, default
/tmp/kbctl-bench) whose embedded server is stopped at the end. Parts:

- ``quality``: ``kbctl eval import`` + ``kbctl eval run`` on SciFact, Cranfield, CISI
  → docs/retrieval-quality.md and the README's "Retrieval quality"
- ``sweep``:   hybrid fusion settings on SciFact and Cranfield → docs/retrieval-quality.md
- ``parity``:  kbctl's BM25 lane against bm25s on the same tokens → docs/benchmarks.md
- ``dense``:   HNSW vs exact top-10 agreement, unfiltered and 5%-filtered → docs/benchmarks.md
- ``latency``: search p50/p95 per mode at 10k and 100k chunks, cold CLI call → docs/benchmarks.md
- ``ingest``:  end-to-end chunks/s vs embedding only, unchanged re-import → docs/benchmarks.md
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
- ``prf``:     the feedback step's cost: hybrid with and without ``prf`` at 10k and 100k chunks, with
  the load average → docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, Env, kbctl, machine, write_section

PARTS = (
    "quality",
    "sweep",
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
)
# Where each part's figures go (between <!-- bench:PART --> markers); quality is in the README too.
DOCS = {
    "quality": ("docs/retrieval-quality.md", "README.md"),
    "sweep": ("docs/retrieval-quality.md",),
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
}


def _part(name: str):
    import cold
    import dense
    import ingest
    import latency
    import memory
    import parity
    import quality
    import research
    import serve
    import verify_claim

    return {
        "quality": quality.run,
        "sweep": quality.sweep,
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
    }[name]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--evaldata",
        type=Path,
        default=REPO.parent / "shared" / "evaldata",
        help="folder of BEIR collections (default ../shared/evaldata)",
    )
    ap.add_argument("--home", type=Path, default=Path("/tmp/kbctl-bench"), help="KBCTL_HOME for the benchmark store")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma list of parts: {', '.join(PARTS)}")
    ap.add_argument("--no-write", action="store_true", help="print the tables, leave docs/ alone")
    ap.add_argument("--keep-running", action="store_true", help="leave the embedded server running")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if not (args.evaldata / "scifact" / "corpus.jsonl").exists():
        ap.error(f"no collections under {args.evaldata} (pass --evaldata)")
    env = Env(args.evaldata.resolve(), args.home.resolve())
    try:
        for name in parts:
            print(f"\n== {name}", flush=True)
            t0 = time.perf_counter()
            body = _part(name)(env)
            took = time.perf_counter() - t0
            stamp = f"_Measured {machine()}; part took {took:.0f} s (`python bench/run.py --only {name}`)._\n\n"
            if not args.no_write:
                for doc in DOCS[name]:
                    write_section(REPO / doc, name, stamp + body)
    finally:
        if not args.keep_running:
            kbctl(env, "db", "stop", check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
