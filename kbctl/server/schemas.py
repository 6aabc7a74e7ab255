"""The shapes of the tools' answers: one pydantic model per tool, defined once.

The same model is a tool's MCP ``outputSchema`` (the SDK derives it from the tool's return
annotation) and its ``structuredContent``, and the body of the JSON API's answer (``/v1``): both
surfaces dump the same instance (``dump``), so they cannot drift apart. Every model forbids
unknown fields (``additionalProperties: false``), so a field added to a tool must be added here.

A cited passage or document names its resource (``kbctl://<namespace>/<doc_id>[#<chunk_id>]``,
``resource_uri``), which an MCP client can read (``resources/read``) within the same scope.

Every id an agent sees (``doc_id``, ``chunk_id``, ``query_id``) is an opaque string sealed under its
tenant's key (``kbctl.ids``): the raw ids come from sequences all tenants share, so they would count
what other tenants do; strings, too, because a JavaScript client reads a JSON number above 2^53 wrong.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from ..errors import UsageError, echo

__all__ = [
    "Citation",
    "Passage",
    "SearchAnswer",
    "Signals",
    "Thresholds",
    "Evidence",
    "VerifyAnswer",
    "ResearchPassage",
    "ResearchDocument",
    "ResearchAnswer",
    "DocumentChunk",
    "DocumentAnswer",
    "NamespaceInfo",
    "NamespacesAnswer",
    "FeedbackAnswer",
    "OUTPUTS",
    "RESOURCE_SCHEME",
    "RESOURCE_TEMPLATE",
    "resource_uri",
    "parse_resource_uri",
    "dump",
]

RESOURCE_SCHEME = "kbctl"
RESOURCE_TEMPLATE = "kbctl://{namespace}/{doc_id}{#chunk_id}"
_LOCATION = ("page", "boxes", "link")
_ID = r"^[a-z]_[A-Za-z0-9_-]{22}$"
_DOC_ID = Field(description="The document's opaque id (get_document, record_feedback).", pattern=_ID)
_CHUNK_ID = Field(description="The passage's opaque id (get_document's around_chunk).", pattern=_ID)
_QUERY_ID = Field(description="Opaque id of the logged query (for record_feedback); null when not logged.", pattern=_ID)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


_TRUNCATED = Field(
    False,
    description="True when this answer was cut to fit [server] max_output_tokens: a value ending with […] or "
    "items left out that no next_cursor leads to (kbctl.server.cap). Absent when nothing was.",
)


class _Capped(_Shape):
    """A tool's answer, held whole to ``[server] max_output_tokens`` (``kbctl.server.cap``): its
    ``truncated`` is left out unless true, and a document's ``uri`` unless known."""

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if not ((k == "truncated" and not v) or (k == "uri" and v is None))}


class Citation(_Shape):
    """Where a passage comes from: enough to cite it and to open it (``resource``)."""

    rank: int = Field(description="1 for the best passage.")
    citation: str = Field(description="How to cite it: source and heading.")
    doc_id: str = _DOC_ID
    chunk_id: str = _CHUNK_ID
    namespace: str
    resource: str = Field(description="kbctl://<namespace>/<doc_id>#<chunk_id>: resources/read opens it.")
    page: int | None = Field(None, description="PDF page of the passage (absent when unknown).")
    boxes: list[list[float]] | None = Field(
        None, description="The passage's PDF lines: (page, x0, top, x1, bottom) each (absent when unknown)."
    )
    link: str | None = Field(None, description="A web page's link to the passage (text fragment), when known.")

    @model_serializer(mode="wrap")
    def _drop_unknown_location(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if not (k in _LOCATION and v is None)}


class Passage(Citation):
    """A passage of a search answer: its citation, scores and text."""

    title: str
    source: str = Field(description="The document: its path under the ingested folder, or its URL.")
    score: float | None = Field(description="Raw score of the ranking that placed it (fused, lane or reranker).")
    relevance: float | None = Field(description="0 to 1: the score over the best this query could get.")
    text: str


class SearchAnswer(_Capped):
    """``search_knowledge``: passages (paged), or with ``budget`` one context block and its citations."""

    query_id: str | None = _QUERY_ID
    strategy: str = Field(description="How the search ran (the router's choice).")
    passages: list[Passage] | None = Field(description="The passages of this page; null with `budget`.")
    context: str | None = Field(description="With `budget`: numbered passages with citations; else null.")
    citations: list[Citation] | None = Field(description="With `budget`: the context's citations; else null.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last one.")
    withheld: int = Field(description="Passages the access gate withheld from this principal (a count only).")
    notes: list[str]
    truncated: bool = _TRUNCATED


class Signals(_Shape):
    dense_similarity: float | None
    key_terms_found: float = Field(description="Share of the claim's key terms the passage holds, 0 to 1.")
    matched_terms: list[str]
    lane_agreement: float = Field(description="1 when both lanes found the passage, 0.5 when one did.")
    supports: bool = Field(description="Both signals pass their thresholds.")


class Thresholds(_Shape):
    dense_similarity: float
    key_terms_found: float


class Evidence(Passage):
    signals: Signals


class VerifyAnswer(_Capped):
    """``verify_claim``: the weighed passages and whether one is evidence."""

    query_id: str | None = _QUERY_ID
    claim: str
    key_terms: list[str]
    evidence_found: bool
    thresholds: Thresholds
    evidence: list[Evidence]
    withheld: int
    truncated: bool = _TRUNCATED


class ResearchPassage(_Shape):
    chunk_id: str = _CHUNK_ID
    citation: str
    relevance: float | None
    resource: str
    text: str


class ResearchDocument(_Shape):
    doc_id: str = _DOC_ID
    title: str
    source: str
    namespace: str
    resource: str = Field(description="kbctl://<namespace>/<doc_id>: resources/read opens the document.")
    passages: list[ResearchPassage]


class ResearchAnswer(_Capped):
    """``research_topic``: sub-queries, feedback terms and diverse passages grouped by document."""

    query_id: str | None = _QUERY_ID
    topic: str
    sub_queries: list[str]
    feedback_terms: list[str]
    documents: list[ResearchDocument]
    withheld: int
    truncated: bool = _TRUNCATED


class DocumentChunk(_Shape):
    chunk_id: str = _CHUNK_ID
    position: int
    text: str
    heading_path: list[str]
    page: int | None
    token_count: int | None
    resource: str


class DocumentAnswer(_Capped):
    """``get_document``: a document's fields and its chunks in order (paged)."""

    doc_id: str = _DOC_ID
    namespace: str
    title: str
    source: str
    uri: str | None = Field(None, description="The document's URL (absent for a file: see `source`).")
    source_type: str | None
    metadata: dict[str, Any]
    chunk_count: int
    char_count: int | None
    resource: str
    chunks: list[DocumentChunk]
    next_cursor: str | None
    truncated: bool = _TRUNCATED


class NamespaceInfo(_Shape):
    name: str
    documents: int
    chunks: int
    profile: str | None


class NamespacesAnswer(_Shape):
    """``list_namespaces``: the namespaces this agent may search."""

    namespaces: list[NamespaceInfo]


class FeedbackAnswer(_Shape):
    """``record_feedback``: what was recorded."""

    recorded: bool
    query_id: str = Field(pattern=_ID)
    doc_id: str = _DOC_ID
    useful: bool


OUTPUTS: dict[str, type[BaseModel]] = {
    "search_knowledge": SearchAnswer,
    "verify_claim": VerifyAnswer,
    "research_topic": ResearchAnswer,
    "get_document": DocumentAnswer,
    "list_namespaces": NamespacesAnswer,
    "record_feedback": FeedbackAnswer,
}
"""Each tool's answer model: its MCP outputSchema and the JSON API's body."""


def dump(answer: Any) -> Any:
    """An answer as JSON data, as both surfaces send it (a model by its schema, anything else as is)."""
    return answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer


def resource_uri(namespace: str, doc_id: str, chunk_id: str | None = None) -> str:
    """``kbctl://<namespace>/<doc_id>[#<chunk_id>]`` of opaque ids (the namespace percent-encoded:
    it may hold ``:``; an opaque id is URL-safe as it is)."""
    base = f"{RESOURCE_SCHEME}://{quote(namespace, safe='')}/{doc_id}"
    return base if chunk_id is None else f"{base}#{chunk_id}"


_ID_PART = re.compile(_ID.strip("^$"))


def parse_resource_uri(uri: str) -> tuple[str, str, str | None]:
    """``(namespace, doc_id, chunk_id or None)`` of a ``kbctl://`` URI, the ids as given when they
    have an opaque id's shape (opening them is the caller's); a UsageError for anything else."""
    hint = "a resource is kbctl://<namespace>/<doc_id>[#<chunk_id>], as search results link it"
    scheme, sep, rest = str(uri).partition("://")
    rest, _, chunk = rest.partition("#")
    namespace, _, doc = rest.partition("/")
    if scheme != RESOURCE_SCHEME or not sep or not namespace or not _ID_PART.fullmatch(doc):
        raise UsageError(f"invalid resource URI {echo(str(uri))}", hint=hint)
    if chunk and not _ID_PART.fullmatch(chunk):
        raise UsageError(f"invalid resource URI {echo(str(uri))}", hint=hint)
    return unquote(namespace), doc, chunk or None
