"""The tools an agent calls, the same in MCP (``kbctl.server.mcp``) and the JSON API (``kbctl.server.app``).

Each tool is a method of ``Toolbox`` (bound to one agent) whose typed, described parameters make
its JSON schema. Every answer stays under ``[server] max_output_tokens`` estimated tokens: a long
list is paged (``limit``, and ``next_cursor`` to pass back as ``cursor``) and ``snippets`` cuts
each passage to its first sentences.
"""

import functools  # no `from __future__ import annotations`: the SDK and pydantic read these signatures at runtime
import json
import re
import time
from collections import Counter
from typing import Annotated, Any, Callable

from pydantic import Field

from ..errors import UsageError
from ..search.context import estimate_tokens, format_context
from ..types import Hit, SearchResult
from .agents import Agent
from .metrics import Metrics
from .service import Service

__all__ = ["Toolbox", "DESCRIPTIONS"]

DESCRIPTIONS = {
    "search_knowledge": (
        "Search the knowledge base. Returns the best passages, each with its citation (source and "
        "heading), doc_id and chunk_id; or, with `budget`, one prompt-ready context block of numbered "
        "passages with citations that fits that many tokens. Use `filters` for metadata (key=value, "
        "key>=v, 'key in a,b'), `limit`/`cursor` to page, `snippets` for short passages."
    ),
    "verify_claim": (
        "Look for evidence of a claim. Returns the best passages with signals: dense similarity to the "
        "claim, the share of the claim's key terms each contains, and whether the lexical and dense "
        "lanes agree; `evidence_found` is true when a passage passes both thresholds (similarity and "
        "term share). Absence of evidence is not evidence against the claim."
    ),
    "research_topic": (
        "Explore a topic broadly: runs the topic and sub-queries built from feedback terms of the first "
        "results, picks diverse passages (MMR over their embeddings) and groups them by document, within "
        "a token budget. Returns the sub-queries, the feedback terms and the documents with passages. To "
        "see as many documents as possible, search_knowledge with `snippets` and a larger `k` covers more."
    ),
    "get_document": (
        "Read a document by doc_id (from a search result): its title, source and chunks in order; with "
        "`around_chunk` (a chunk_id) only `window` chunks either side of it. Page with `limit`/`cursor`."
    ),
    "list_namespaces": "List the namespaces (collections) this agent may search, with their document counts.",
    "record_feedback": (
        "Judge a document a logged search returned: `query_id` from that search's answer, `doc_id` of the "
        "document, `useful` true or false. Only available when the server logs queries."
    ),
}

_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
its may might more most no not of on or our over should so such than that the their them then there these they this
those to under up was we were what when where which while who whom why will with would you your""".split()
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]+")
_SENT = re.compile(r"(?<=[.!?])\s+")

Namespaces = Annotated[
    list[str] | None, Field(description="Namespaces to search (default: every one this agent may use).")
]
Limit = Annotated[int | None, Field(description="At most this many items in this answer (paging).", ge=1, le=100)]
Cursor = Annotated[str | None, Field(description="next_cursor of a previous answer, to get the next page.")]
Snippets = Annotated[bool, Field(description="Short passages (first sentences only), to see more of them.")]


def tool(fn: Callable) -> Callable:
    """A tool method: checks the agent may call it, times it, counts its errors (``Metrics``)."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        self.agent.check_tool(name)
        t0 = time.perf_counter()
        labels = {"mode": "-", "strategy": "-"}
        try:
            out = fn(self, *args, labels=labels, **kwargs)
        except Exception as e:
            self.metrics.errors.labels(tool=name, error=type(e).__name__).inc()
            raise
        self.metrics.latency.labels(tool=name, **labels).observe(time.perf_counter() - t0)
        return out

    call.__signature__ = _without_labels(fn)  # type: ignore[attr-defined]
    return call


def _without_labels(fn: Callable):
    import inspect

    sig = inspect.signature(fn)
    return sig.replace(parameters=[p for n, p in sig.parameters.items() if n != "labels"])


class Toolbox:
    """The six tools, bound to one agent, over the service's knowledge bases."""

    def __init__(self, service: Service, agent: Agent, metrics: Metrics) -> None:
        self.service, self.agent, self.metrics = service, agent, metrics
        self.limits = service.server

    # -- tools ---------------------------------------------------------------------------------------

    @tool
    def search_knowledge(
        self,
        query: Annotated[str, Field(description="What to look for, in natural language or keywords.")],
        namespaces: Namespaces = None,
        k: Annotated[
            int | None, Field(description="How many passages to retrieve (default: the agent's).", ge=1)
        ] = None,
        filters: Annotated[
            list[str] | None,
            Field(description="Metadata filters: key=value, key!=v, key>=v, key<=v, key~prefix, 'key in a,b'."),
        ] = None,
        budget: Annotated[
            int | None,
            Field(description="Return one prompt-ready context block within this many tokens instead of a list.", ge=1),
        ] = None,
        mode: Annotated[str, Field(description="auto | hybrid | dense | lexical.")] = "auto",
        limit: Limit = None,
        cursor: Cursor = None,
        snippets: Snippets = False,
        *,
        labels: dict,
    ) -> dict[str, Any]:
        result, query_id = self._search("search_knowledge", query, namespaces, k=k, filters=filters, mode=mode)
        labels.update(mode=result.mode, strategy=result.strategy)
        if budget is not None:
            self._check_budget(budget)
            return {
                "query_id": query_id,
                "context": _context(result, min(budget, self._cap())),
                "citations": [_cite(h) for h in result.hits],
                "withheld": result.withheld,
            }
        passages = [_passage(h, snippets) for h in result.hits]
        page, next_cursor = self._page(passages, limit, cursor)
        return {
            "query_id": query_id,
            "strategy": result.strategy,
            "passages": page,
            "next_cursor": next_cursor,
            "withheld": result.withheld,
            "notes": list(result.notes),
        }

    @tool
    def verify_claim(
        self,
        claim: Annotated[str, Field(description="The statement to find evidence for.")],
        namespaces: Namespaces = None,
        k: Annotated[int, Field(description="Passages to weigh.", ge=1, le=20)] = 5,
        filters: Annotated[
            list[str] | None,
            Field(description="Metadata filters on the evidence (key=value, key!=v, ...), as in search_knowledge."),
        ] = None,
        *,
        labels: dict,
    ) -> dict[str, Any]:
        result, query_id = self._search(
            "verify_claim", claim, namespaces, k=k, filters=filters, mode="hybrid", explain=True
        )
        labels.update(mode=result.mode, strategy=result.strategy)
        terms = key_terms(claim)
        sim_min, terms_min = float(self.limits["evidence_min_similarity"]), float(self.limits["evidence_min_terms"])
        with self.service.kb(self.agent.tenant) as kb:
            similarity = claim_similarities(kb, claim, result.hits)
        evidence = []
        for h in result.hits:
            s = evidence_signals(h, terms, similarity.get((h.namespace, h.chunk_id)))
            s["supports"] = (s["dense_similarity"] or 0) >= sim_min and s["key_terms_found"] >= terms_min
            evidence.append({**_passage(h, snippets=False), "signals": s})
        page, _ = self._page(evidence, None, None)
        return {
            "query_id": query_id,
            "claim": claim,
            "key_terms": terms,
            "evidence_found": any(e["signals"]["supports"] for e in evidence),
            "thresholds": {"dense_similarity": sim_min, "key_terms_found": terms_min},
            "evidence": page,
        }

    @tool
    def research_topic(
        self,
        topic: Annotated[str, Field(description="The topic or question to research.")],
        namespaces: Namespaces = None,
        budget: Annotated[
            int | None,
            Field(description="Token budget of the passages returned (default: the agent's, else 4000).", ge=1),
        ] = None,
        *,
        labels: dict,
    ) -> dict[str, Any]:
        budget = budget or self.agent.budget or 4000
        self._check_budget(budget)
        first, query_id = self._search("research_topic", topic, namespaces, k=20, mode="hybrid", prf="hybrid")
        labels.update(mode=first.mode, strategy=first.strategy)
        terms = feedback_terms(topic, first.hits[:5])
        subs = [f"{topic} {t}" for t in terms[:3]]
        pool = {(h.namespace, h.chunk_id): h for h in first.hits}
        for q in subs:
            more, _ = self._search(None, q, namespaces, k=10, mode="hybrid")
            for h in more.hits:
                pool.setdefault((h.namespace, h.chunk_id), h)
        with self.service.kb(self.agent.tenant) as kb:
            vectors = kb.passage_vectors(list(pool.values()))
        picked = mmr(list(pool.values()), vectors, lambda_=0.7, n=len(pool))  # the budget decides how many fit
        return {
            "query_id": query_id,
            "topic": topic,
            "sub_queries": subs,
            "feedback_terms": terms,
            "documents": _grouped(picked, min(budget, self._cap())),
        }

    @tool
    def get_document(
        self,
        doc_id: Annotated[int, Field(description="doc_id of a passage from a search.")],
        around_chunk: Annotated[
            int | None, Field(description="chunk_id to center on (default: the whole document).")
        ] = None,
        window: Annotated[int, Field(description="Chunks either side of around_chunk.", ge=0, le=50)] = 2,
        limit: Limit = None,
        cursor: Cursor = None,
        snippets: Snippets = False,
        *,
        labels: dict,
    ) -> dict[str, Any]:
        with self.service.kb(self.agent.tenant) as kb:
            scope = self.agent.scope(None, kb.namespace_names())
            doc = kb.document(doc_id, scope, around_chunk=around_chunk, window=window, principal=self.agent.principal)
        chunks = [{**c, "text": _snip(c["text"]) if snippets else c["text"]} for c in doc.pop("chunks")]
        page, next_cursor = self._page(chunks, limit, cursor)
        return {**doc, "metadata": dict(doc["metadata"] or {}), "chunks": page, "next_cursor": next_cursor}

    @tool
    def list_namespaces(self, *, labels: dict) -> dict[str, Any]:
        with self.service.kb(self.agent.tenant) as kb:
            rows = kb.namespaces()
        scope = set(self.agent.scope(None, [r["name"] for r in rows]))
        return {
            "namespaces": [
                {"name": r["name"], "documents": r["documents"], "chunks": r["chunks"], "profile": r["profile"]}
                for r in rows
                if r["name"] in scope
            ]
        }

    @tool
    def record_feedback(
        self,
        query_id: Annotated[int, Field(description="query_id of the search being judged.")],
        doc_id: Annotated[int, Field(description="doc_id of a document that search returned.")],
        useful: Annotated[bool, Field(description="Whether the document helped answer the query.")],
        *,
        labels: dict,
    ) -> dict[str, Any]:
        if not self.limits["log_queries"]:
            raise UsageError("feedback needs the query log", hint="set [server] log_queries = true")
        with self.service.kb(self.agent.tenant) as kb:
            kb.record_feedback(self.agent.name, query_id, doc_id, useful)
        return {"recorded": True, "query_id": query_id, "doc_id": doc_id, "useful": useful}

    # -- the search behind three tools, and the JSON API's raw search ---------------------------------

    def search_result(self, query: str, namespaces: list[str] | None = None, **options: Any) -> SearchResult:
        """A plain ``SearchResult`` within the agent's scope (``/v1/search`` with ``"raw": true``)."""
        self.agent.check_tool("search_knowledge")
        result, _ = self._search(None, query, namespaces, **options)
        return result

    def _search(
        self, tool_name: str | None, query: str, namespaces: list[str] | None, **options: Any
    ) -> tuple[SearchResult, int | None]:
        if not isinstance(query, str) or len(query) > int(self.limits["max_query_chars"]):
            raise UsageError(f"query is longer than {self.limits['max_query_chars']} characters")
        k = options.pop("k", None) or self.agent.k
        if k is not None and k > int(self.limits["max_k"]):
            raise UsageError(f"k must be at most {self.limits['max_k']}, got {k}")
        with self.service.kb(self.agent.tenant) as kb:
            scope = self.agent.scope(namespaces, kb.namespace_names())
            if not scope:
                raise UsageError("no namespace is available to search")
            filters = options.pop("filters", None) or ()
            result = kb.search(query, scope, k=k, filters=filters, principal=self.agent.principal, **options)
            query_id = (
                kb.log_query(self.agent.name, tool_name, result) if tool_name and self.limits["log_queries"] else None
            )
        if result.withheld:
            self.metrics.withheld.labels(tool=tool_name or "search").inc(result.withheld)
        return result, query_id

    def _cap(self) -> int:
        return int(self.limits["max_output_tokens"])

    def _check_budget(self, budget: int) -> None:
        if budget > int(self.limits["max_budget"]):
            raise UsageError(f"budget must be at most {self.limits['max_budget']} tokens, got {budget}")

    def _page(self, items: list[dict], limit: int | None, cursor: str | None) -> tuple[list[dict], str | None]:
        """Items from ``cursor`` on, at most ``limit`` and within the token cap; the next cursor or None."""
        start = _offset(cursor)
        end = len(items) if limit is None else min(len(items), start + limit)
        out: list[dict] = []
        used = 200  # room for the answer's other fields
        for item in items[start:end]:
            cost = estimate_tokens(json.dumps(item, default=str))
            if out and used + cost > self._cap():
                break
            out.append(item if used + cost <= self._cap() else {**item, "text": _snip(item.get("text", ""))})
            used += cost
        nxt = start + len(out)
        return out, (str(nxt) if nxt < len(items) else None)


def _context(result: SearchResult, budget: int) -> str:
    """``format_context`` held to ``budget`` as a whole (its per-passage estimates can round past it)."""
    text = format_context(result, budget)
    over = estimate_tokens(text) - budget
    return text if over <= 0 or budget - over - 4 < 1 else format_context(result, budget - over - 4)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 6:
        raise UsageError(f"invalid cursor {cursor!r}", hint="pass next_cursor of the previous answer")
    return int(cursor)


def _cite(h: Hit) -> dict[str, Any]:
    return {
        "rank": h.rank,
        "citation": h.citation,
        "doc_id": h.doc_id,
        "chunk_id": h.chunk_id,
        "namespace": h.namespace,
        **_location(h),
    }


def _location(h: Hit) -> dict[str, Any]:
    """Where the passage is, when known: its PDF page and line boxes, a web page's text-fragment link."""
    meta = h.metadata if isinstance(h.metadata, dict) else {}
    return {k: meta[k] for k in ("page", "boxes", "link") if meta.get(k)}


def _passage(h: Hit, snippets: bool) -> dict[str, Any]:
    return {
        **_cite(h),
        "title": h.title,
        "source": h.source,
        "relevance": h.relevance,
        "text": _snip(h.text) if snippets else h.text,
    }


def _snip(text: str, tokens: int = 60) -> str:
    out = ""
    for s in _SENT.split(text.strip()):
        if out and estimate_tokens(out + " " + s) > tokens:
            break
        out = (out + " " + s).strip()
    words = out.split()
    return out if estimate_tokens(out) <= tokens else " ".join(words[: tokens * 3 // 4]) + " …"


def key_terms(text: str) -> list[str]:
    """The claim's content words (lowercase, no stopwords, no repeats), in order."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP))


def _stem(w: str) -> str:
    return w[:6] if len(w) > 6 else w


def claim_similarities(kb: Any, claim: str, hits: tuple[Hit, ...] | list[Hit]) -> dict[tuple[str, int], float]:
    """Cosine similarity of the claim's embedding and each hit's stored chunk vector, keyed by
    (namespace, chunk_id): for every hit, also those only the lexical lane found (whose dense lane
    score is unknown). The claim is embedded once per profile among the hits' namespaces."""
    import numpy as np

    from ..embed import get_embedder

    if not hits:
        return {}
    vectors, profiles = kb.passage_vectors_and_profiles(list(hits))
    claims: dict[str, Any] = {}
    out: dict[tuple[str, int], float] = {}
    for h in hits:
        v = vectors.get((h.namespace, h.chunk_id))
        if v is None:
            continue
        prof = profiles[h.namespace]
        if prof.name not in claims:
            q = np.asarray(get_embedder(prof, purpose="query").embed_query(claim), dtype=np.float32)
            claims[prof.name] = q / (np.linalg.norm(q) or 1.0)
        out[(h.namespace, h.chunk_id)] = round(float(claims[prof.name] @ (v / (np.linalg.norm(v) or 1.0))), 6)
    return out


def evidence_signals(h: Hit, terms: list[str], similarity: float | None = None) -> dict[str, Any]:
    """Dense similarity (``similarity``, else the dense lane's score), share of the key terms found
    (matched on their first 6 letters) and lane agreement."""
    words = {_stem(w.lower()) for w in _WORD.findall(h.text + " " + h.title)}
    found = [t for t in terms if _stem(t) in words]
    dense, lexical = h.lanes.get("dense") or {}, h.lanes.get("lexical") or {}
    agree = sum(1 for lane in (dense, lexical) if lane.get("rank") is not None) / 2
    return {
        "dense_similarity": similarity if similarity is not None else dense.get("score"),
        "key_terms_found": round(len(found) / max(len(terms), 1), 3),
        "matched_terms": found,
        "lane_agreement": agree,
    }


def feedback_terms(topic: str, hits: tuple[Hit, ...] | list[Hit], n: int = 5) -> list[str]:
    """The words most frequent across the feedback passages (in two or more when there are several), not in the topic."""
    own = {_stem(t) for t in key_terms(topic)}
    df: Counter[str] = Counter()
    for h in hits:
        df.update({w for w in key_terms(h.text) if len(w) > 3 and _stem(w) not in own and not w.isdigit()})
    floor = 2 if len(hits) > 2 else 1
    return [w for w, c in df.most_common(n * 3) if c >= floor][:n]


def mmr(hits: list[Hit], vectors: dict, lambda_: float, n: int) -> list[Hit]:
    """Maximal marginal relevance: each next hit the most relevant and least like those picked."""
    import numpy as np

    def rel(h: Hit) -> float:
        return h.relevance if h.relevance is not None else (h.score or 0.0)

    def unit(h: Hit):
        v = vectors.get((h.namespace, h.chunk_id))
        return None if v is None else v / (np.linalg.norm(v) or 1.0)

    units = {id(h): unit(h) for h in hits}
    left, picked = sorted(hits, key=rel, reverse=True), list[Hit]()
    while left and len(picked) < n:

        def score(h: Hit) -> float:
            u = units[id(h)]
            sims = [float(u @ units[id(p)]) for p in picked if u is not None and units[id(p)] is not None]
            return lambda_ * rel(h) - (1 - lambda_) * max(sims, default=0.0)

        best = max(left, key=score)
        picked.append(best)
        left.remove(best)
    return picked


def _grouped(hits: list[Hit], budget: int) -> list[dict]:
    """Passages grouped by document (first picked first), added while they fit ``budget`` tokens."""
    docs: dict[tuple[str, int], dict] = {}
    used = 0
    for h in hits:
        cost = estimate_tokens(h.text) + 20
        if used + cost > budget:
            text = _snip(h.text)
            cost = estimate_tokens(text) + 20
            if used + cost > budget:
                continue
        else:
            text = h.text
        used += cost
        d = docs.setdefault(
            (h.namespace, h.doc_id),
            {"doc_id": h.doc_id, "title": h.title, "source": h.source, "namespace": h.namespace, "passages": []},
        )
        d["passages"].append({"chunk_id": h.chunk_id, "citation": h.citation, "relevance": h.relevance, "text": text})
    return list(docs.values())


def error_status(e: Exception) -> int:
    """The HTTP status of a tool's error: 400 for the caller's mistakes, 500 for the rest."""
    from ..errors import ConfigError

    return 400 if isinstance(e, (UsageError, ConfigError)) else 499 if type(e).__name__ == "Cancelled" else 500
