"""The tools an agent calls, the same in MCP (``kbctl.server.mcp``) and the JSON API (``kbctl.server.app``).

Each tool is a method of ``Toolbox`` (bound to one agent) whose typed, described parameters make
its JSON schema. Every answer stays under ``[server] max_output_tokens`` estimated tokens, counted
over the whole answer (``kbctl.server.cap``): a long list is paged (``limit``, and ``next_cursor`` to
pass back as ``cursor``), ``snippets`` cuts each passage to its first sentences, and what is still
over is cut in ``kbctl.server.cap``'s order, the answer saying ``truncated``.

Every id a tool gives out or takes (``doc_id``, ``chunk_id``, ``query_id``, the ids in a resource
URI) is opaque, sealed under the agent's tenant's key (``kbctl.ids``, ``Service.ids``): the library
below works with the raw ids, which no answer or error shows. An id that does not open (forged,
garbled, of another kind or another tenant) is "… is not available", as a missing document is.
"""

import contextlib
import copy
import functools  # no `from __future__ import annotations`: the SDK and pydantic read these signatures at runtime
import json
import time
from typing import Annotated, Any, Callable, Iterator

from pydantic import BeforeValidator, Field, Strict
from pydantic_core import PydanticCustomError

from .. import telemetry
from ..errors import UsageError
from ..ids import KINDS, Ids
from ..search.context import estimate_tokens
from ..search.evidence import snip
from ..types import SearchResult
from .agents import Agent, unavailable
from .answers import (
    cite,
    context_of,
    display_source,
    offset,
    passage,
    sealed_result,
    search_answer,
    without_server_paths,
)
from .cap import FIXED, FLOOR, cost, drop_tail, field_tokens, long_values, shorten, squeeze
from .metrics import Metrics
from .schemas import (
    DocumentAnswer,
    FeedbackAnswer,
    NamespacesAnswer,
    ResearchAnswer,
    SearchAnswer,
    VerifyAnswer,
    parse_resource_uri,
    resource_uri,
)
from .service import Service

__all__ = ["Toolbox", "DESCRIPTIONS"]

DESCRIPTIONS = {
    "search_knowledge": (
        "Search the knowledge base. Returns the best passages, each with its citation (source and "
        "heading), doc_id and chunk_id (opaque strings); or, with `budget`, one prompt-ready context block of numbered "
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
        "Read a document by doc_id (the opaque string of a search result): its title, source and chunks in order; with "
        "`around_chunk` (a chunk_id) only `window` chunks either side of it. Page with `limit`/`cursor`."
    ),
    "list_namespaces": "List the namespaces (collections) this agent may search, with their document counts.",
    "record_feedback": (
        "Judge a document a logged search returned: `query_id` from that search's answer, `doc_id` of the "
        "document, `useful` true or false. Only available when the server logs queries."
    ),
}


def _no_boolean(value: Any) -> Any:
    """A count as sent, unless it is a boolean: pydantic reads ``true`` as 1 (its lax mode, which
    is kept for a count sent as a numeric string, ``"5"``), an agent's mistake answered as a count."""
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer, not a boolean")
    return value


# an int parameter: a JSON number (or a numeric string), never a boolean; after its Field (a bound
# before it would be checked against None too: "Unable to apply constraint 'ge'", a 500)
Count = BeforeValidator(_no_boolean)
Flag = Strict()  # a bool parameter: JSON true or false, never "yes" or 1 (the document route reads its query)

Namespaces = Annotated[
    list[str] | None, Field(description="Namespaces to search (default: every one this agent may use).")
]
Limit = Annotated[
    int | None, Field(description="At most this many items in this answer (paging).", ge=1, le=100), Count
]
Cursor = Annotated[str | None, Field(description="next_cursor of a previous answer, to get the next page.")]
Snippets = Annotated[bool, Flag, Field(description="Short passages (first sentences only), to see more of them.")]


def tool(fn: Callable) -> Callable:
    """A tool method: checks the agent may call it, times it, counts its errors (``Metrics``, by the
    agent's tenant), traces it (``kbctl.tool``; what follows its search, ``kbctl.search.render``)."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        self.agent.check_tool(name)
        t0 = time.perf_counter()
        labels = {"mode": "-", "strategy": "-"}
        try:
            with (
                telemetry.span("kbctl.tool", {"kbctl.tool": name, "kbctl.agent": self.agent.name}),
                telemetry.holding(),
            ):
                out = fn(self, *args, labels=labels, **kwargs)
        except Exception as e:
            self.metrics.errors.labels(tool=name, error=type(e).__name__, tenant=self.agent.tenant or "").inc()
            raise
        self.metrics.latency.labels(tool=name, tenant=self.agent.tenant or "", **labels).observe(
            time.perf_counter() - t0
        )
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

    @property
    def ids(self) -> Ids:
        """The agent's tenant's opaque ids (its key as the last borrow read it, ``Service.ids``)."""
        return self.service.ids(self.agent.tenant)

    # -- tools ---------------------------------------------------------------------------------------

    @tool
    def search_knowledge(
        self,
        query: Annotated[str, Field(description="What to look for, in natural language or keywords.")],
        namespaces: Namespaces = None,
        k: Annotated[
            int | None, Field(description="How many passages to retrieve (default: the agent's).", ge=1), Count
        ] = None,
        filters: Annotated[
            list[str] | None,
            Field(
                description="Metadata filters: key=value, key!=v, key>=v, key<=v, key~prefix, 'key in a,b', key"
                ' (has a value), !key (has none); a value may be quoted: author="Priya Raman", author="" (empty).'
            ),
        ] = None,
        budget: Annotated[
            int | None,
            Field(description="Return one prompt-ready context block within this many tokens instead of a list.", ge=1),
            Count,
        ] = None,
        mode: Annotated[str, Field(description="auto | hybrid | dense | lexical.")] = "auto",
        limit: Limit = None,
        cursor: Cursor = None,
        snippets: Snippets = False,
        *,
        labels: dict,
    ) -> SearchAnswer:
        if budget is not None:
            _budget_alone(limit, cursor, snippets)
            self._check_budget(budget)
        cap = min(budget, self._cap()) if budget is not None else 0
        made: dict[str, dict[str, Any]] = {}  # the answer, made once: for the query log and the agent

        def budgeted(result: SearchResult, query_id: str | None) -> dict[str, Any]:
            context, held = context_of(result, cap)
            answer = search_answer(result, query_id, context=context, citations=[cite(h, self.ids) for h in held])
            if result.hits and not held:
                answer["notes"].append(
                    f"a budget of {budget} tokens holds none of the {len(result.hits)} passages found; raise it"
                )
            return self._fit(answer, drop=lambda out: self._narrow_context(out, result, cap))

        def in_context(result: SearchResult) -> list[tuple[str, int]]:
            made["answer"] = budgeted(result, _SOME_QUERY_ID)  # logged: its id counted as long as any is
            return self._shown(made["answer"]["citations"])  # what the agent sees

        result, query_id = self._search(
            "search_knowledge", query, namespaces, k=k, filters=filters, mode=mode, shown=in_context if budget else None
        )
        labels.update(mode=result.mode, strategy=result.strategy)
        if budget is not None:
            answer = {**(made.get("answer") or budgeted(result, query_id)), "query_id": query_id}
        else:
            passages = [passage(h, snippets, self.ids) for h in result.hits]
            page, next_cursor, snipped = self._page(passages, limit, cursor)
            answer = search_answer(result, query_id, passages=page, next_cursor=next_cursor)
            answer = self._fit(answer, drop=lambda out: self._drop_page(out, "passages", cursor), cut=snipped)
        return SearchAnswer.model_validate(answer)

    @tool
    def verify_claim(
        self,
        claim: Annotated[str, Field(description="The statement to find evidence for.")],
        namespaces: Namespaces = None,
        k: Annotated[int, Field(description="Passages to weigh.", ge=1, le=20), Count] = 5,
        filters: Annotated[
            list[str] | None,
            Field(description="Metadata filters on the evidence (key=value, key!=v, ...), as in search_knowledge."),
        ] = None,
        *,
        labels: dict,
    ) -> VerifyAnswer:
        check, query_id = self._search(
            "verify_claim",
            claim,
            namespaces,
            k=k,
            filters=filters,
            call=lambda kb, scope, **o: kb.verify_claim(claim, scope, **o),
        )
        labels.update(mode=check.result.mode, strategy=check.result.strategy)
        evidence = [
            {**passage(h, False, self.ids), "signals": s} for h, s in zip(check.result.hits, check.signals, strict=True)
        ]
        page, _, _ = self._page(evidence, None, None)
        if len(page) < len(evidence):
            # cut by max_output_tokens, with no cursor: the passages that support the claim are kept
            # first, then the best of the others, and shown in rank order (evidence_found must show)
            first = [e for e in evidence if e["signals"]["supports"]]
            kept, _, _ = self._page(first + [e for e in evidence if not e["signals"]["supports"]], None, None)
            page = sorted(kept, key=lambda e: e["rank"])
        answer = {
            "query_id": query_id,
            "claim": claim,
            "key_terms": check.key_terms,
            "evidence_found": check.evidence_found,
            "thresholds": check.thresholds,
            "evidence": page,
            "withheld": check.result.withheld,
        }
        return VerifyAnswer.model_validate(self._fit(answer, drop=self._drop_evidence, cut=len(page) < len(evidence)))

    @tool
    def research_topic(
        self,
        topic: Annotated[str, Field(description="The topic or question to research.")],
        namespaces: Namespaces = None,
        budget: Annotated[
            int | None,
            Field(description="Token budget of the passages returned (default: the agent's, else 4000).", ge=1),
            Count,
        ] = None,
        *,
        labels: dict,
    ) -> ResearchAnswer:
        # the defaults (20 passages, 4000 tokens) within [server] max_k and max_budget; a budget asked
        # for (or the agent's) is checked against them as ever
        budget = budget or self.agent.budget or min(4000, self.limits.max_budget)
        self._check_budget(budget)
        cap = min(budget, self._cap())
        made: dict[str, dict[str, Any]] = {}  # the answer, made once: for the query log and the agent

        def shown(found: Any) -> list[tuple[str, int]]:
            made["answer"] = self._research_answer(topic, found, _SOME_QUERY_ID)  # its id counted as long as any is
            return self._shown(made["answer"]["documents"])  # what the agent sees

        found, query_id = self._search(
            "research_topic",
            topic,
            namespaces,
            k=min(20, self.limits.max_k),
            call=lambda kb, scope, **o: kb.research(topic, scope, budget=cap, **o),
            shown=shown,
            withheld=lambda found: found.withheld,  # its searches' withheld passages, each once
        )
        labels.update(mode=found.result.mode, strategy=found.result.strategy)
        answer = made.get("answer") or self._research_answer(topic, found, query_id)
        return ResearchAnswer.model_validate({**answer, "query_id": query_id})

    @tool
    def get_document(
        self,
        doc_id: Annotated[str, Field(description="doc_id of a passage from a search (an opaque string).")],
        around_chunk: Annotated[
            str | None, Field(description="chunk_id to center on (default: the whole document).")
        ] = None,
        window: Annotated[int, Field(description="Chunks either side of around_chunk.", ge=0, le=50), Count] = 2,
        limit: Limit = None,
        cursor: Cursor = None,
        snippets: Snippets = False,
        *,
        labels: dict,
    ) -> DocumentAnswer:
        offset(cursor)  # the arguments first: a bad cursor is the caller's mistake whatever the document
        doc = self._document(doc_id, None, around_chunk, window)
        chunks = [{**c, "text": snip(c["text"]) if snippets else c["text"]} for c in doc.pop("chunks")]
        page, next_cursor, snipped = self._page(chunks, limit, cursor)
        answer = {**doc, "chunks": page, "next_cursor": next_cursor}
        answer = self._fit(answer, drop=lambda out: self._drop_page(out, "chunks", cursor), cut=snipped)
        return DocumentAnswer.model_validate(answer)

    @tool
    def list_namespaces(self, *, labels: dict) -> NamespacesAnswer:
        with self.service.kb(self.agent.tenant, self.agent.made_for) as kb:
            rows = kb.namespaces()
        scope = set(self.agent.scope(None, [r["name"] for r in rows]))
        return NamespacesAnswer.model_validate(
            {
                "namespaces": [
                    {"name": r["name"], "documents": r["documents"], "chunks": r["chunks"], "profile": r["profile"]}
                    for r in rows
                    if r["name"] in scope
                ]
            }
        )

    @tool
    def record_feedback(
        self,
        query_id: Annotated[str, Field(description="query_id of the search being judged.")],
        doc_id: Annotated[str, Field(description="doc_id of a document that search returned.")],
        useful: Annotated[bool, Flag, Field(description="Whether the document helped answer the query.")],
        *,
        labels: dict,
    ) -> FeedbackAnswer:
        if not self.limits.log_queries:
            raise UsageError("feedback needs the query log", hint="set [server] log_queries = true")
        query, doc = self._open("q", query_id), self._open("d", doc_id)
        with (
            self.service.kb(self.agent.tenant, self.agent.made_for) as kb,
            self._as_given({("query", query): query_id, ("document", doc): doc_id}),
        ):
            kb.record_feedback(self.agent.name, query, doc, useful)
        return FeedbackAnswer(recorded=True, query_id=query_id, doc_id=doc_id, useful=useful)

    # -- documents as resources (MCP resources/read) ---------------------------------------------------

    def namespaces_in_scope(self, requested: list[str]) -> list[str]:
        """The namespaces ``requested`` (each in scope and existing), else every one in the agent's scope."""
        with self.service.kb(self.agent.tenant, self.agent.made_for) as kb:
            return self.agent.scope(requested or None, kb.namespace_names())

    def read_resource(self, uri: str) -> tuple[str, dict[str, Any]]:
        """The text of resource ``kbctl://<namespace>/<doc_id>[#<chunk_id>]`` and what it is (its
        ``_meta``): the document's chunks in order (within ``[server] max_output_tokens``, then cut,
        ``truncated`` true: page with get_document), or the one chunk. Within the agent's scope and its
        principal's ACL, as get_document; anything else is "… is not available"."""
        self.agent.check_tool("get_document")
        namespace, doc_id, chunk_id = parse_resource_uri(uri)
        doc = self._document(doc_id, namespace, chunk_id, 0)
        chunks = doc["chunks"]  # their ids sealed as this key seals them: one spelling per id (kbctl.ids)
        if chunk_id is not None:
            chunks = [c for c in chunks if c["chunk_id"] == chunk_id]
        title, source = doc["title"], doc["source"]
        text, shown, cut = self._resource_text(title, source, chunks)
        if estimate_tokens(text) > self._cap():  # a long title or source: cut as get_document's are
            tokens = field_tokens(self._cap())
            title, source = shorten(title, tokens), shorten(source, tokens)
            text, shown, cut = self._resource_text(title, source, chunks)
            cut = cut or (title, source) != (doc["title"], doc["source"])
        meta = {
            "namespace": doc["namespace"],
            "doc_id": doc["doc_id"],
            "chunk_id": chunk_id,
            "title": title,
            "source": source,
            "chunks": shown,
            "truncated": cut,
        }
        return text, meta

    def _resource_text(self, title: str, source: str, chunks: list[dict]) -> tuple[str, int, bool]:
        """A resource's Markdown: its head, then its chunks while they fit the cap; how many it holds
        and whether one was cut."""
        head = f"# {title}\n\nSource: {source}"
        parts, used, truncated = [head], estimate_tokens(head), False
        for c in chunks:
            cost = estimate_tokens(c["text"]) + 2
            if used + cost > self._cap() and len(parts) > 1:
                truncated = True
                break
            fits = used + cost <= self._cap()
            parts.append(c["text"] if fits else snip(c["text"]))
            truncated = truncated or not fits  # a chunk snipped to fit is cut too
            used += cost
        return "\n\n".join(parts), len(parts) - 1, truncated

    def _document(self, doc_id: str, namespace: str | None, around_chunk: str | None, window: int) -> dict[str, Any]:
        """``kb.document`` within the agent's scope (one namespace of it, when given) and its principal's
        ACL, as an agent sees it: opaque ids, ``source`` instead of server paths, and resource links."""
        raw_doc = self._open("d", doc_id)
        raw_chunk = None if around_chunk is None else self._open("c", around_chunk)
        given = {("document", raw_doc): doc_id, ("chunk", raw_chunk): around_chunk}
        with self.service.kb(self.agent.tenant, self.agent.made_for) as kb, self._as_given(given):
            scope = self.agent.scope([namespace] if namespace is not None else None, kb.namespace_names())
            doc = kb.document(raw_doc, scope, around_chunk=raw_chunk, window=window, principal=self.agent.principal)
        doc.pop("id", None)  # the library's row id, the same as doc_id
        meta = dict(doc["metadata"] or {})
        ns, ident = doc["namespace"], self.ids.seal("d", doc["doc_id"])
        doc["doc_id"] = ident
        chunks = [
            {**c, "chunk_id": chunk, "resource": resource_uri(ns, ident, chunk)}
            for c in doc.pop("chunks")
            for chunk in (self.ids.seal("c", c["chunk_id"]),)
        ]
        doc = {**doc, "source": display_source(doc["uri"], meta), "metadata": meta, "resource": resource_uri(ns, ident)}
        return {**without_server_paths(doc), "chunks": chunks}

    # -- the search behind three tools, and the JSON API's raw search ---------------------------------

    def search_result(self, query: str, namespaces: list[str] | None = None, **options: Any) -> SearchResult:
        """A plain ``SearchResult`` within the agent's scope."""
        self.agent.check_tool("search_knowledge")
        result, _ = self._search(None, query, namespaces, **options)
        return result

    def search_raw(
        self,
        query: str,
        namespaces: list[str] | None = None,
        k: Annotated[int | None, Field(ge=1), Count] = None,
        filters: list[str] | None = None,
        mode: str = "auto",
        per_doc: Annotated[int | None, Count] = None,  # ranges: checked by the library (SearchOptions), as for the CLI
        fusion: str | None = None,
        ef_search: Annotated[int | None, Count] = None,
        rerank: Annotated[bool | None, Flag] = None,
        prf: str | None = None,
        explain: Annotated[bool, Flag] = False,
    ) -> dict[str, Any]:
        """``/v1/search`` with ``"raw": true``: the ``SearchResult`` as JSON, its arguments typed like the tools'."""
        options = dict(per_doc=per_doc, fusion=fusion, ef_search=ef_search, rerank=rerank, prf=prf, explain=explain)
        result = self.search_result(query, namespaces, k=k, filters=filters, mode=mode, **options)
        return sealed_result(result, self.ids)

    def _search(
        self,
        tool_name: str | None,
        query: str,
        namespaces: list[str] | None,
        call: Callable[..., Any] | None = None,
        shown: Callable[[Any], list[tuple[str, int]]] | None = None,
        withheld: Callable[[Any], int] | None = None,
        **options: Any,
    ) -> tuple[Any, str | None]:
        """``kb.search`` (or ``call(kb, scope, k=, filters=, principal=)``, a library verb whose answer
        has the ``result``) within the agent's scope and limits; the answer and its logged query's
        opaque id.
        ``shown(answer)``: the (namespace, doc_id) pairs the tool will show, when not every hit: the
        query log keeps those, and feedback is taken on them only.
        ``withheld(answer)``: the passages the call withheld, added once to ``kbctl_hits_withheld``
        (default: the result's count; a research's several searches count each passage once)."""
        if not isinstance(query, str) or len(query) > self.limits.max_query_chars:
            raise UsageError(f"query is longer than {self.limits.max_query_chars} characters")
        k = options.pop("k", None) or self.agent.k
        if k is not None and k > self.limits.max_k:
            raise UsageError(f"k must be at most {self.limits.max_k}, got {k}")
        with self.service.kb(
            self.agent.tenant, self.agent.made_for
        ) as kb:  # the borrow reads the key ``shown`` seals with
            scope = self.agent.scope(namespaces, kb.namespace_names())
            if not scope:
                raise UsageError("no namespace is available to search")
            filters = options.pop("filters", None) or ()
            if call is None:
                answer = result = kb.search(
                    query, scope, k=k, filters=filters, principal=self.agent.principal, **options
                )
            else:
                kw = {"k": k} if k is not None else {}
                answer = call(kb, scope, filters=filters, principal=self.agent.principal, **kw, **options)
                result = answer.result
            query_id = (
                kb.log_query(self.agent.name, tool_name, result, shown(answer) if shown else None)
                if tool_name and self.limits.log_queries
                else None
            )
        counted = result.withheld if withheld is None else withheld(answer)
        if counted:
            self.metrics.withheld.labels(tool=tool_name or "search", tenant=self.agent.tenant or "").inc(counted)
        telemetry.after("kbctl.search.render", {"kbctl.hits": len(result.hits)})  # until the tool returns
        return answer, None if query_id is None else self.ids.seal("q", query_id)

    def _cap(self) -> int:
        return self.limits.max_output_tokens

    def _open(self, kind: str, token: Any) -> int:
        """The raw id of an opaque one the agent sent; anything that does not open under its tenant's
        key is not available, as a missing one is (the message names what the agent sent)."""
        n = self.ids.open(kind, token)
        if n is None:
            raise unavailable(KINDS[kind], token)
        return n

    def _shown(self, items: list[dict[str, Any]]) -> list[tuple[str, int]]:
        """The (namespace, raw doc_id) pairs of an answer's citations or documents: what the query
        log keeps as shown, and feedback is taken on."""
        return [(i["namespace"], self._open("d", i["doc_id"])) for i in items]

    @contextlib.contextmanager
    def _as_given(self, given: dict[tuple[str, int | None], str | None]) -> Iterator[None]:
        """The library's "… is not available" names the raw id it was given: re-raised naming the
        opaque id the agent sent instead (``given``: (kind, raw id) to that), so no raw id is shown."""
        try:
            yield
        except UsageError as e:
            for (kind, raw), token in given.items():
                if raw is not None and e.message == str(unavailable(kind, raw)):
                    raise unavailable(kind, token) from None
            raise

    def _check_budget(self, budget: int) -> None:
        if budget > self.limits.max_budget:
            raise UsageError(f"budget must be at most {self.limits.max_budget} tokens, got {budget}")

    def _research_answer(self, topic: str, found: Any, query_id: str | None) -> dict[str, Any]:
        """research_topic's answer of ``kb.research``'s, within the cap."""
        seal = self.ids.seal
        documents = [
            {
                **d,
                "doc_id": doc,
                "resource": resource_uri(d["namespace"], doc),
                "passages": [
                    {**p, "chunk_id": chunk, "resource": resource_uri(d["namespace"], doc, chunk)}
                    for p in d["passages"]
                    for chunk in (seal("c", p["chunk_id"]),)
                ],
            }
            for d in found.documents
            for doc in (seal("d", d["doc_id"]),)
        ]
        answer = {
            "query_id": query_id,
            "topic": topic,
            "sub_queries": list(found.sub_queries),
            "feedback_terms": list(found.feedback_terms),
            "documents": without_server_paths(documents),
            "withheld": found.withheld,
        }
        return self._fit(answer, drop=self._drop_research, echo=_cut_topic)

    def _page(self, items: list[dict], limit: int | None, cursor: str | None) -> tuple[list[dict], str | None, bool]:
        """Items from ``cursor`` on, at most ``limit`` and within the token cap; the next cursor or None;
        whether the first item's text was snipped to fit."""
        start = offset(cursor)
        end = len(items) if limit is None else min(len(items), start + limit)
        out: list[dict] = []
        snipped = False
        used = 200  # room for the answer's other fields (``_fit`` measures the whole answer after)
        for item in items[start:end]:
            cost = estimate_tokens(json.dumps(item, default=str, ensure_ascii=False))
            if out and used + cost > self._cap():
                break
            if used + cost > self._cap():  # the first item alone is past the cap: its text is snipped
                text = item.get("text", "")
                item, snipped = {**item, "text": snip(text)}, snip(text) != text
            out.append(item)
            used += cost
        nxt = start + len(out)
        return out, (str(nxt) if nxt < len(items) else None), snipped

    # -- the whole answer within the cap (kbctl.server.cap) ------------------------------------------

    def _fit(
        self,
        answer: dict[str, Any],
        drop: Callable[[dict[str, Any]], bool] | None = None,
        echo: Callable[[dict[str, Any], int], bool] | None = None,
        cut: bool = False,
    ) -> dict[str, Any]:
        """``answer`` as it is when its whole JSON is within the cap, else a copy cut in
        ``kbctl.server.cap``'s order: ``echo`` (the query echoed back) and long values, then ``drop``
        (the lowest-ranked items; True when what left has no cursor to it), then any text, then
        metadata keys. ``truncated`` is true when anything was cut (or ``cut``: a text snipped already)."""
        cap = self._cap()
        whole = {**answer, "truncated": True} if cut else answer
        if cost(whole) <= cap:
            return whole
        out = copy.deepcopy(answer)
        out["truncated"] = True  # counted from the start: it is part of what is measured
        tokens = field_tokens(cap)
        meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else None
        if echo is not None:
            cut = echo(out, tokens) or cut
        if cost(out) > cap:
            cut = long_values(out, tokens, meta) or cut
        if cost(out) > cap:
            cut = squeeze(out, cap, tokens, FIXED | {"text", "context"}) or cut
        if cost(out) > cap and drop is not None:
            cut = drop(out) or cut
        if cost(out) > cap:
            cut = squeeze(out, cap, FLOOR) or cut
        if cost(out) > cap and meta:
            cut = True
            while meta and cost(out) > cap:
                meta.pop(next(reversed(meta)))
        if not cut:
            del out["truncated"]
        return out

    def _drop_page(self, out: dict[str, Any], key: str, cursor: str | None) -> bool:
        """A page's last items leave (the first stays); ``next_cursor`` resumes at the first that left."""
        start, items, before = offset(cursor), out[key], out["next_cursor"]
        shown = len(items)
        out["next_cursor"] = str(start + shown)  # counted while items leave: as long as it can be
        drop_tail(out, items, self._cap())
        out["next_cursor"] = str(start + len(items)) if len(items) < shown else before
        return False  # what left is on the next page

    def _drop_research(self, out: dict[str, Any]) -> bool:
        """research_topic's last document's last passage leaves first (a document left with none
        leaves too); the first passage stays."""
        documents, left = out["documents"], False
        while sum(len(d["passages"]) for d in documents) > 1 and cost(out) > self._cap():
            documents[-1]["passages"].pop()
            if not documents[-1]["passages"]:
                documents.pop()
            left = True
        return left

    def _drop_evidence(self, out: dict[str, Any]) -> bool:
        """verify_claim's passages that do not support the claim leave first, the lowest-ranked first;
        then the supporting ones (what made ``evidence_found`` true stays as long as one can)."""
        evidence = out["evidence"]
        left = False
        while len(evidence) > 1 and cost(out) > self._cap():
            others = [i for i, e in enumerate(evidence) if not e["signals"]["supports"]]
            evidence.pop(others[-1] if others else -1)
            left = True
        return left

    def _narrow_context(self, out: dict[str, Any], result: SearchResult, budget: int) -> bool:
        """A budgeted context made again within the largest smaller budget with which it and its
        citations fit (a binary search): its lowest-ranked passages leave first, then the last one is
        cut at a sentence. The best passage stays: when no budget fits, the smallest that holds it."""
        cap, tokens = self._cap(), field_tokens(self._cap())

        def made(b: int) -> dict[str, Any] | None:
            text, held = context_of(result, b)
            if not held:
                return None
            cites = [cite(h, self.ids) for h in held]
            long_values(cites, tokens)
            squeeze(cites, 0, tokens)  # cut as step 1 cut the citations before
            return {**out, "context": text, "citations": cites}

        lo, hi = 1, budget - 1
        fits: dict[str, Any] | None = None
        over: dict[str, Any] | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            candidate = made(mid)
            if candidate is not None and cost(candidate) <= cap:
                fits, lo = candidate, mid + 1
            elif candidate is None:
                lo = mid + 1
            else:
                over, hi = candidate, mid - 1
        chosen = fits or over
        if chosen is None:
            return False
        out.update(context=chosen["context"], citations=chosen["citations"])
        return True


def _budget_alone(limit: int | None, cursor: str | None, snippets: bool) -> None:
    """A budgeted search's answer is one context block of whole passages: ``limit``, ``cursor`` and
    ``snippets`` shape a page of passages, which it has not (they were ignored without a word)."""
    given = [f"`{name}`" for name, value in (("limit", limit), ("cursor", cursor)) if value is not None]
    given += ["`snippets`"] if snippets else []
    if given:
        raise UsageError(
            f"budget does not go with {' or '.join(given)}: with a budget the answer is one context block of"
            " whole passages (`k` says how many are weighed), not a page of passages to limit, resume or"
            " shorten; leave budget out to page or shorten the passages"
        )


_SOME_QUERY_ID = "q_" + "A1" * 11
"""A logged query's id as the answer is cut before the query is logged: every sealed id is as long,
and none is estimated higher (each character a piece, as letters and digits alternate here)."""


def _cut_topic(out: dict[str, Any], tokens: int) -> bool:
    """research_topic's topic, echoed back in itself and in each sub-query, cut to ``tokens``; each
    sub-query keeps the feedback term it adds."""
    topic = out["topic"]
    short = shorten(topic, tokens)
    if short == topic:
        return False
    out["topic"] = short
    out["sub_queries"] = [
        short + q[len(topic) :] if q.startswith(topic) else shorten(q, tokens) for q in out["sub_queries"]
    ]
    return True
