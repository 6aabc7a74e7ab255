"""``research_topic`` against plain search: distinct relevant documents within the same token budget.

    python bench/research.py [--home /tmp/kbctl-bench] [--evaldata DIR] [--budgets 2000,4000] [--limit N] [--no-write]

Collections with many judged-relevant documents per query, CISI and Cranfield (the bench store's
``cisi`` and ``cranfield`` namespaces, all-MiniLM-L6-v2, only read); every test query with
judgments. The tools run in-process as ``kbctl serve`` runs them (``kbctl.server.tools.Toolbox``,
unscoped). For each query and budget B, the distinct judged-relevant documents in

- ``search_knowledge(query, budget=B)``: the prompt-ready context block (k = 50, full passages in
  rank order until B estimated tokens; the documents counted are those whose passages are in it);
- the same search's passages as snippets (``snippets``: first sentences, about 60 tokens), in rank
  order until B: the list mode an agent would page through, held to the same budget;
- ``research_topic(topic, budget=B)``: the documents it returns (their passages fit B).

Averaged over queries; "recall" is that number over the query's judged-relevant documents.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Env, ensure_imported, judged_queries, save_json, script_args, write_figures

COLLECTIONS = ("cisi", "cranfield")
BUDGETS = (2000, 4000)
K = 50
DOCS = ("docs/benchmarks.md", "docs/agents.md")
_HEAD = re.compile(r"^\[(\d+)\] ", re.M)


def _snippet_docs(passages: list[dict], budget: int) -> set[str]:
    from kbctl.search.context import estimate_tokens

    used, docs = 0, set()
    for p in passages:
        cost = estimate_tokens(f"[{p['rank']}] {p['citation']}\n{p['text']}")
        if used + cost > budget:
            break
        used += cost
        docs.add(p["source"])
    return docs


def measure(env: Env, budgets=BUDGETS, limit: int | None = None) -> str:
    from verify_claim import toolbox

    from kbctl.server.schemas import dump  # an answer as the JSON both surfaces send

    # the k = 50 snippet list in one page; CISI has queries longer than the default 2000 characters
    box, service = toolbox(env, max_output_tokens=50000, max_query_chars=20000)
    raw: dict = {}
    rows = []
    try:
        for name in COLLECTIONS:
            queries = judged_queries(env, name)[:limit]
            per = {b: defaultdict(list) for b in budgets}
            for n, (qid, query, relevant) in enumerate(queries, 1):
                listed = dump(box.search_knowledge(query, namespaces=[name], k=K, snippets=True))
                assert listed["next_cursor"] is None, "the snippet list was paged: raise max_output_tokens"
                source = {p["rank"]: p["source"] for p in listed["passages"]}
                for b in budgets:
                    plain = dump(box.search_knowledge(query, namespaces=[name], k=K, budget=b))
                    shown = {int(r) for r in _HEAD.findall(plain["context"])}
                    plain_docs = {source[r] for r in shown}
                    snip_docs = _snippet_docs(listed["passages"], b)
                    research = dump(box.research_topic(query, namespaces=[name], budget=b))
                    research_docs = {d["source"] for d in research["documents"]}
                    for label, docs in (
                        ("search (context)", plain_docs),
                        ("search (snippets)", snip_docs),
                        ("research_topic", research_docs),
                    ):
                        found = len(docs & relevant)
                        per[b][label].append((found, found / len(relevant), len(docs)))
                    raw.setdefault(name, []).append(
                        {
                            "query": qid,
                            "budget": b,
                            "relevant": len(relevant),
                            "search": sorted(plain_docs & relevant),
                            "snippets": sorted(snip_docs & relevant),
                            "research": sorted(research_docs & relevant),
                            "sub_queries": research["sub_queries"],
                        }
                    )
                if n % 25 == 0:
                    print(f"  {name}: {n}/{len(queries)} queries", file=sys.stderr, flush=True)
            for b in budgets:
                for label, vals in per[b].items():
                    rows.append(
                        {
                            "collection": name,
                            "queries": len(queries),
                            "budget": b,
                            "tool": label,
                            "relevant docs": statistics.mean(v[0] for v in vals),
                            "recall": statistics.mean(v[1] for v in vals),
                            "docs returned": statistics.mean(v[2] for v in vals),
                        }
                    )
    finally:
        service.close()
    save_json(env, "research", raw)
    lines = [
        "Distinct judged-relevant documents per query within the budget (mean over the test queries with"
        " judgments); recall = that over the query's judged-relevant documents; all-MiniLM-L6-v2.",
        "",
        "| collection | queries | budget (tokens) | tool | relevant docs | recall | docs returned |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['collection']} | {r['queries']} | {r['budget']} | {r['tool']} | {r['relevant docs']:.2f} |"
        f" {r['recall']:.3f} | {r['docs returned']:.1f} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def run(env: Env) -> str:
    """The ``research`` part of ``bench/run.py``."""
    for name in COLLECTIONS:
        ensure_imported(env, name)
    return measure(env, limit=env.queries)


def main() -> int:
    ap = script_args(__doc__, "only the first N queries of each collection")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    args = ap.parse_args()
    env = Env(args.evaldata.resolve(), args.home.resolve())
    budgets = tuple(int(b) for b in args.budgets.split(","))
    body = measure(env, budgets, args.limit)
    print(body)
    if not args.no_write and args.limit is None:
        write_figures("research", "research.py", DOCS, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
