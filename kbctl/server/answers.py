"""How a search hit becomes what an agent reads: a passage, a citation and its location, a context
held to its budget, search_knowledge's answer, and a document's source without the server's paths.
Shared by the tools (``kbctl.server.tools``) and what cuts their answers (``kbctl.server.cap``)."""

from typing import Any

from ..errors import UsageError, echo
from ..ids import Ids
from ..search.context import context_blocks, estimate_tokens
from ..search.evidence import snip
from ..types import Hit, SearchResult, store_id
from .schemas import Citation, Passage, resource_uri

__all__ = [
    "display_source",
    "without_server_paths",
    "public_source",
    "context_of",
    "search_answer",
    "offset",
    "cite",
    "location",
    "passage",
    "sealed_result",
]


def display_source(uri: str, meta: dict) -> str:
    """How an answer names a document: a file by its path under the folder it was ingested from
    (its basename when that is unknown), anything else by its URI (as search hits cite it)."""
    if not uri.startswith("file://"):
        return uri
    return str(meta.get("path") or uri.rstrip("/").rsplit("/", 1)[-1])


def without_server_paths(obj: Any) -> Any:
    """``obj`` without the server's own paths: no ``file://`` URI and no ``abs_path`` at any depth
    (an agent learns a document's ``source``, its path under the ingested folder, instead)."""
    if isinstance(obj, dict):
        return {
            k: public_source(v) if k == "source" else without_server_paths(v)
            for k, v in obj.items()
            if k != "abs_path" and not (k in ("uri", "parent_uri") and isinstance(v, str) and v.startswith("file://"))
        }
    if isinstance(obj, list):
        return [without_server_paths(v) for v in obj]
    return obj


def public_source(source: Any) -> Any:
    """A hit's ``source`` as an agent sees it: a bare ``file://`` URI (no ingested path) is cut to its basename."""
    return display_source(source, {}) if isinstance(source, str) else source


def context_of(result: SearchResult, budget: int) -> tuple[str, list[Hit]]:
    """``format_context`` held to ``budget`` as a whole (its per-passage estimates can round past
    it), and the hits it holds."""
    blocks = context_blocks(result, budget)
    text = "\n".join(block for _, block in blocks)
    over = estimate_tokens(text) - budget
    if over > 0 and budget - over - 4 >= 1:
        blocks = context_blocks(result, budget - over - 4)
        text = "\n".join(block for _, block in blocks)
    return text, [h for h, _ in blocks]


def search_answer(result: SearchResult, query_id: str | None, **parts: Any) -> dict[str, Any]:
    """search_knowledge's answer: ``parts`` (passages and next_cursor, or context and citations)."""
    return {
        "query_id": query_id,
        "strategy": result.strategy,
        "passages": None,
        "context": None,
        "citations": None,
        "next_cursor": None,
        "withheld": result.withheld,
        "notes": list(result.notes),
        **parts,
    }


def offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 6:  # '²' is a digit int() refuses
        raise UsageError(f"invalid cursor {echo(cursor)}", hint="pass next_cursor of the previous answer")
    return int(cursor)


def cite(h: Hit, ids: Ids) -> dict[str, Any]:
    """A hit's citation, its ids sealed under the agent's tenant's key (``kbctl.ids``)."""
    doc, chunk = ids.seal("d", store_id(h.doc_id)), ids.seal("c", store_id(h.chunk_id))
    return Citation.model_validate(
        {
            "rank": h.rank,
            "citation": h.citation,
            "doc_id": doc,
            "chunk_id": chunk,
            "namespace": h.namespace,
            "resource": resource_uri(h.namespace, doc, chunk),
            **location(h),
        }
    ).model_dump(mode="json")


def location(h: Hit) -> dict[str, Any]:
    """Where the passage is, when known: its PDF page and line boxes, a web page's text-fragment link.
    The metadata holds the document's front matter too: a key of another shape there (``link: 5``)
    is not a location, and is left out rather than failing the answer."""
    meta = h.metadata if isinstance(h.metadata, dict) else {}
    out: dict[str, Any] = {}
    page, boxes, link = meta.get("page"), meta.get("boxes"), meta.get("link")
    if isinstance(page, int) and not isinstance(page, bool) and page >= 1:
        out["page"] = page
    if isinstance(boxes, list) and boxes and all(_numbers(b) for b in boxes):
        out["boxes"] = boxes
    if isinstance(link, str) and link:
        out["link"] = link
    return out


def _numbers(box: Any) -> bool:
    return isinstance(box, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in box)


def passage(h: Hit, snippets: bool, ids: Ids) -> dict[str, Any]:
    return Passage.model_validate(
        {
            **cite(h, ids),
            "title": h.title,
            "source": public_source(h.source),
            "score": h.score,
            "relevance": h.relevance,
            "text": snip(h.text) if snippets else h.text,
        }
    ).model_dump(mode="json")


def sealed_result(result: SearchResult, ids: Ids) -> dict[str, Any]:
    """``/v1/search``'s raw answer: the ``SearchResult`` as JSON with every id sealed (its hits'
    ``doc_id`` and ``chunk_id``, the generations in ``details``) and no server paths."""
    out = result.to_json()
    for hit in out["hits"]:
        hit["doc_id"], hit["chunk_id"] = ids.seal("d", hit["doc_id"]), ids.seal("c", hit["chunk_id"])
    details = out["details"]
    if isinstance(details.get("generations"), dict):
        details["generations"] = {n: None if g is None else ids.seal("g", g) for n, g in details["generations"].items()}
    return without_server_paths(out)
