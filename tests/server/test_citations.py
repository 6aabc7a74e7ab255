"""A citation's location fields come from the chunk's metadata, which holds the document's front
matter too: a front matter ``link: 5`` or ``boxes: [1, 2]`` failed the Citation model, and every
search that found the document answered 400 (invalid arguments) over /v1 and crashed over MCP."""

from __future__ import annotations

import pytest

from kbctl.ids import Ids
from kbctl.server.answers import cite
from kbctl.types import Hit

IDS = Ids(b"k" * 32)


def _cite(hit: Hit) -> dict:
    return cite(hit, IDS)


def _hit(**metadata) -> Hit:
    return Hit(1, 0.5, 7, 9, "docs/a.md", "A", "text", "kb", metadata, "docs/a.md")


@pytest.mark.parametrize(
    "metadata",
    [{"link": 5}, {"boxes": [1, 2]}, {"boxes": "x"}, {"page": "intro"}, {"page": True}, {"page": 0}],
)
def test_a_location_field_of_another_shape_is_left_out(metadata):
    cited = _cite(_hit(**metadata))
    assert cited["resource"] == f"kbctl://kb/{IDS.seal('d', 7)}#{IDS.seal('c', 9)}"
    assert not {"link", "boxes", "page"} & set(cited)


def test_location_fields_of_their_shape_are_kept():
    cited = _cite(_hit(page=3, boxes=[[3, 1.0, 2.0, 3.0, 4.0]], link="https://x.org/a#:~:text=b"))
    assert (cited["page"], cited["boxes"], cited["link"]) == (
        3,
        [[3.0, 1.0, 2.0, 3.0, 4.0]],
        "https://x.org/a#:~:text=b",
    )


QUERIES = [
    ("how long do refunds take", []),
    ("invoice", ["source_type=markdown"]),
    ("card payment failed", ["title~P"]),
]


@pytest.mark.parametrize("query, filters", QUERIES)
def test_the_json_api_gives_the_librarys_hits_and_citations(served, query, filters):
    """The same search from Python (``kbctl.open().search``) and over ``POST /v1/search``: the same
    passages, in the same order, with the same citation text, document and chunk (sealed), and the
    same context block under a budget."""
    import httpx

    import kbctl
    from kbctl.search.context import estimate_tokens

    with kbctl.open(config=served.config, home=served.home, tenant=served.tenant) as kb:
        local = kb.search(query, "billing_kb", k=8, filters=filters)
        ids = kb.tenants.ids()
        context = kb.context(local, 300)
    body = {"query": query, "namespaces": ["billing_kb"], "k": 8, "filters": filters}
    r = httpx.post(served.url + "/v1/search", json=body, headers=served.headers("ops"), timeout=30)
    assert r.status_code == 200, r.text
    passages = r.json()["passages"]
    assert local.hits and len(passages) == len(local.hits)
    for h, p in zip(local.hits, passages):
        assert (p["rank"], p["citation"], p["text"]) == (h.rank, h.citation, h.text)
        assert (ids.open("d", p["doc_id"]), ids.open("c", p["chunk_id"])) == (h.doc_id, h.chunk_id)
    r = httpx.post(served.url + "/v1/search", json=body | {"budget": 300}, headers=served.headers("ops"), timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["context"] == context
    assert estimate_tokens(r.json()["context"]) <= 300


def test_the_json_api_reads_a_number_in_a_filter_as_the_library_does(served):
    """``size=1234.0`` equals a stored 1234, over ``POST /v1/search`` as in Python (it compared texts)."""
    import httpx

    import kbctl

    with kbctl.open(config=served.config, home=served.home, tenant=served.tenant) as kb:
        top = kb.search("invoice", "billing_kb", k=1).hits[0]
    size = top.metadata["size"]
    assert isinstance(size, int)
    body = {"query": "invoice", "namespaces": ["billing_kb"], "k": 8, "filters": [f"size={size}.0"]}
    r = httpx.post(served.url + "/v1/search", json=body, headers=served.headers("ops"), timeout=30)
    assert r.status_code == 200, r.text
    assert top.citation in {p["citation"] for p in r.json()["passages"]}
