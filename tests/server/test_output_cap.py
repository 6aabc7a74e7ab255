"""``[server] max_output_tokens`` bounds the whole answer an agent receives, not only its passages'
text: citations (a PDF passage's line boxes, a long heading), research_topic's topic, sub-queries and
document fields, get_document's metadata and title were not counted, and an answer built to fit
went past the cap by all of them. Each answer below is over the cap only through such a field; it
is cut to the cap (``kbctl.server.cap``: long values first, then the lowest-ranked items, then any
value), says ``truncated``, and keeps what it is for (a passage, a chunk)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from types import SimpleNamespace

from kbctl.config import load_settings
from kbctl.ids import Ids
from kbctl.search.context import estimate_tokens
from kbctl.search.evidence import Research
from kbctl.server.agents import Agent
from kbctl.server.metrics import Metrics
from kbctl.server.schemas import OUTPUTS, dump
from kbctl.server.tools import Toolbox
from kbctl.types import Hit, SearchResult
from tests.fixtures.scripts import SENTENCES

CAP = 1000
TEXT = "Refunds are paid within five days of the request. The card is credited, not the account."
BOXES = [[1, 72.5, 100.25 + i, 523.75, 112.125 + i] for i in range(120)]  # a PDF passage's lines: ~3,000 tokens
IDS = Ids(b"k" * 32)  # the tenant's opaque ids (kbctl.ids)


def _cost(answer) -> int:
    """What the agent receives, as ``_page`` counts it: the estimate of the answer's JSON, as the
    JSON API and MCP send it (UTF-8, not escaped)."""
    return estimate_tokens(json.dumps(dump(answer), ensure_ascii=False))


def _hit(i: int, *, heading: str = "Refunds", metadata: dict | None = None, title: str = "Billing") -> Hit:
    return Hit(
        i + 1, 1.0 - i / 100, 100 + i, 200 + i, "billing.pdf", title, TEXT, "kb", dict(metadata or {}),
        f"billing.pdf > {heading}",
    )  # fmt: skip


class _Service:
    def __init__(self, cap: int = CAP, **kb):
        over = {"server.max_output_tokens": cap, "server.log_queries": False}
        self.server = load_settings(overrides=over, env={}).server
        self.kb_fields = kb

    @contextlib.contextmanager
    def kb(self, tenant=None, made_for=None):
        yield SimpleNamespace(namespace_names=lambda: ["kb"], **self.kb_fields)

    def ids(self, tenant=None):
        return IDS


def _search_box(hits, cap: int = CAP) -> Toolbox:
    result = SearchResult("refunds", ("kb",), "hybrid", "hybrid", tuple(hits))
    return Toolbox(_Service(cap, search=lambda *a, **kw: result), Agent(), Metrics())  # type: ignore[arg-type]


def _valid(tool: str, answer) -> dict:
    """The answer as the agent gets it, valid against the tool's schema (no field made up)."""
    data = dump(answer)
    OUTPUTS[tool].model_validate(data)
    return data


# -- search_knowledge ----------------------------------------------------------------------------------


def test_a_budgeted_search_counts_its_citations():
    """The context was held to the budget and its citations came on top: 8 PDF passages with their
    line boxes made an answer of ~26,000 tokens under a cap of 1,000."""
    box = _search_box([_hit(i, metadata={"page": 1, "boxes": BOXES}) for i in range(8)])
    answer = box.search_knowledge("refunds", budget=900)
    data = _valid("search_knowledge", answer)
    assert _cost(answer) <= CAP, _cost(answer)
    assert data.get("truncated") is True
    assert answer.citations and answer.context and "[1]" in answer.context  # the best passage is kept, cited
    assert {c.rank for c in answer.citations} == {int(n) for n in _ranks(answer.context)}


def _ranks(context: str) -> list[str]:
    return [line[1 : line.index("]")] for line in context.splitlines() if line.startswith("[")]


def test_a_passage_whose_citation_alone_is_past_the_cap_is_cut():
    """The first passage of a page was always shown, snipped: a heading of ~2,700 tokens in its
    citation made the answer past the cap whatever was snipped."""
    heading = " ".join(f"section{i}" for i in range(2000))
    box = _search_box([_hit(0, heading=heading), _hit(1)])
    answer = box.search_knowledge("refunds")
    data = _valid("search_knowledge", answer)
    assert _cost(answer) <= CAP, _cost(answer)
    assert data.get("truncated") is True
    assert answer.passages and answer.passages[0].citation.endswith("[…]")
    assert answer.passages[0].resource == f"kbctl://kb/{IDS.seal('d', 100)}#{IDS.seal('c', 200)}"  # never cut


def test_text_in_another_script_is_counted_as_it_is_sent():
    """The cap counted an answer's JSON with non-ASCII escaped (``\\u03b1``, five pieces a Greek
    letter), not as the JSON API and MCP send it (UTF-8): an answer of Greek passages that fits was
    cut to a few."""
    hits = [dataclasses.replace(_hit(i), text=SENTENCES["greek"]) for i in range(3)]
    whole = _search_box(hits, cap=8000).search_knowledge("refunds")
    cap = _cost(whole) + 200  # the room a page keeps for the fields around its passages
    answer = _search_box(hits, cap=cap).search_knowledge("refunds")
    data = _valid("search_knowledge", answer)
    assert "truncated" not in data, _cost(answer)
    assert [p.text for p in answer.passages] == [SENTENCES["greek"]] * 3


def test_a_search_under_the_cap_is_unchanged():
    box = _search_box([_hit(i, metadata={"page": 1, "boxes": BOXES[:2]}) for i in range(3)], cap=8000)
    for answer in (box.search_knowledge("refunds"), box.search_knowledge("refunds", budget=500)):
        data = _valid("search_knowledge", answer)
        assert "truncated" not in data
    assert [p.text for p in box.search_knowledge("refunds").passages] == [TEXT] * 3


# -- research_topic ------------------------------------------------------------------------------------


def _research(topic: str, documents: list[dict], terms=("card", "account", "days")):
    def research(t, scope, **o):
        result = SearchResult(t, ("kb",), "hybrid", "hybrid", ())
        return Research(t, result, [f"{t} {term}" for term in terms], [], list(terms), documents)

    return research


def _doc(i: int, title: str = "Billing") -> dict:
    passages = [
        {"chunk_id": 10 * i + j, "citation": f"b{i}.md > Refunds", "relevance": 0.5, "text": TEXT} for j in (0, 1)
    ]
    return {"doc_id": i, "title": title, "source": f"b{i}.md", "namespace": "kb", "passages": passages}


def test_research_counts_its_topic_and_sub_queries():
    """The topic comes back four times (itself and in each sub-query): a topic of 1,750 characters
    made ~1,700 tokens of echoes the cap did not count."""
    topic = "refund " * 250
    cap = 1300  # four passages with their opaque ids (a token every few characters) and the echoes cut
    service = _Service(cap, research=_research(topic.strip(), [_doc(1), _doc(2)]))
    answer = Toolbox(service, Agent(), Metrics()).research_topic(topic.strip())  # type: ignore[arg-type]
    data = _valid("research_topic", answer)
    assert _cost(answer) <= cap, _cost(answer)
    assert data.get("truncated") is True
    assert answer.topic.endswith("[…]") and len(answer.topic) < len(topic)
    assert [q.rsplit(" ", 1)[-1] for q in answer.sub_queries] == ["card", "account", "days"]  # the terms stay
    assert sum(len(d.passages) for d in answer.documents) == 4  # the passages fit once the echoes are cut


def test_research_counts_its_documents_fields():
    """A document's title (front matter) was not counted: 6 documents of a 300-word title each."""
    title = " ".join(f"title{i}" for i in range(300))
    service = _Service(research=_research("refunds", [_doc(i, title) for i in range(6)]))
    answer = Toolbox(service, Agent(), Metrics()).research_topic("refunds")  # type: ignore[arg-type]
    data = _valid("research_topic", answer)
    assert _cost(answer) <= CAP, _cost(answer)
    assert data.get("truncated") is True
    assert answer.documents and answer.documents[0].passages[0].text == TEXT
    assert all(d.title.endswith("[…]") for d in answer.documents)


def test_research_under_the_cap_is_unchanged():
    service = _Service(research=_research("refunds", [_doc(1), _doc(2)]))
    answer = Toolbox(service, Agent(), Metrics()).research_topic("refunds")  # type: ignore[arg-type]
    data = _valid("research_topic", answer)
    assert "truncated" not in data and answer.topic == "refunds" and len(answer.documents) == 2


# -- get_document --------------------------------------------------------------------------------------


def _document(metadata: dict, title: str = "Billing", chunks: int = 3):
    def document(*a, **kw):
        return {
            "id": 1, "doc_id": 1, "namespace": "kb", "uri": "https://x.org/billing", "title": title,
            "source_type": "html", "metadata": dict(metadata), "chunk_count": chunks, "char_count": 900,
            "chunks": [
                {"chunk_id": 5 + j, "position": j, "text": TEXT, "heading_path": ["Refunds"], "page": None,
                 "token_count": 20}
                for j in range(chunks)
            ],
        }  # fmt: skip

    return document


def _get(metadata: dict, title: str = "Billing", **options):
    service = _Service(document=_document(metadata, title))
    return Toolbox(service, Agent(), Metrics()).get_document(IDS.seal("d", 1), **options)  # type: ignore[arg-type]


def test_a_documents_metadata_is_counted():
    """Front matter of ~2,700 tokens (a description, a list of tags) and a long title came whole with
    every page of chunks, past the cap."""
    description = " ".join(f"word{i}" for i in range(1000))
    tags = [f"tag{i}" for i in range(600)]
    answer = _get({"description": description, "tags": tags, "lang": "en"}, title=description)
    data = _valid("get_document", answer)
    assert _cost(answer) <= CAP, _cost(answer)
    assert data.get("truncated") is True
    assert data["metadata"]["description"].endswith("[…]") and data["metadata"]["lang"] == "en"
    assert data["metadata"]["tags"].startswith('["tag0", "tag1"') and data["metadata"]["tags"].endswith("[…]")
    assert data["title"].endswith("[…]")
    assert [c["text"] for c in data["chunks"]] == [TEXT] * 3


def test_a_document_of_many_small_metadata_keys_is_within_the_cap():
    """Front matter of 400 short keys: no value is long, so keys leave (from the last) instead."""
    answer = _get({f"key{i}": f"value{i}" for i in range(400)})
    data = _valid("get_document", answer)
    assert _cost(answer) <= CAP, _cost(answer)
    assert data.get("truncated") is True and "key0" in data["metadata"] and data["chunks"]


def test_a_document_under_the_cap_is_unchanged():
    answer = _get({"lang": "en"}, limit=2)
    data = _valid("get_document", answer)
    assert "truncated" not in data and data["next_cursor"] == "2" and data["metadata"] == {"lang": "en"}


# -- verify_claim --------------------------------------------------------------------------------------


def test_verify_claim_counts_its_claim():
    """The claim comes back whole, with its key terms and each passage's matched terms: a claim of
    1,800 characters (250 distinct words) was not counted."""
    terms = [f"term{i}" for i in range(250)]
    hits = tuple(_hit(i) for i in range(5))
    signals = [
        {"dense_similarity": 0.6, "key_terms_found": 0.5, "matched_terms": terms[:125], "lane_agreement": 1.0,
         "supports": i == 3}
        for i in range(5)
    ]  # fmt: skip
    check = SimpleNamespace(
        result=SearchResult(" ".join(terms), ("kb",), "hybrid", "hybrid", hits), signals=signals, key_terms=terms,
        evidence_found=True, thresholds={"dense_similarity": 0.53, "key_terms_found": 0.45},
    )  # fmt: skip
    service = _Service(cap=600, verify_claim=lambda *a, **kw: check)
    answer = Toolbox(service, Agent(), Metrics()).verify_claim(" ".join(terms))  # type: ignore[arg-type]
    data = _valid("verify_claim", answer)
    assert _cost(answer) <= 600, _cost(answer)
    assert data.get("truncated") is True
    assert any(e.signals.supports for e in answer.evidence)  # what made evidence_found true stays
    assert answer.claim.endswith("[…]") and answer.key_terms[:2] == ["term0", "term1"]


def test_the_query_log_keeps_what_the_cut_answer_shows():
    """Feedback is taken on what the agent was shown: a context narrowed to fit its citations logs
    only the documents it still cites."""
    logged: list = []
    result = SearchResult(
        "refunds", ("kb",), "hybrid", "hybrid", tuple(_hit(i, metadata={"boxes": BOXES}) for i in range(8))
    )
    service = _Service(search=lambda *a, **kw: result, log_query=lambda *a: logged.append(a[3]) or 42)
    service.server = load_settings(
        overrides={"server.max_output_tokens": 300, "server.log_queries": True}, env={}
    ).server
    answer = Toolbox(service, Agent(), Metrics()).search_knowledge("refunds", budget=300)  # type: ignore[arg-type]
    assert answer.query_id == IDS.seal("q", 42) and _cost(answer) <= 300
    assert logged == [[(c.namespace, IDS.open("d", c.doc_id)) for c in answer.citations]]
    assert 0 < len(answer.citations) < 8


def test_a_resource_counts_its_title():
    """A resource's head (its title and source) was not cut: a title of ~1,300 tokens in a cap of 1,000
    made its text past the cap whatever was left of its chunks."""
    title = " ".join(f"title{i}" for i in range(1000))
    service = _Service(document=_document({}, title))
    text, meta = Toolbox(service, Agent(), Metrics()).read_resource(f"kbctl://kb/{IDS.seal('d', 1)}")  # type: ignore[arg-type]
    assert estimate_tokens(text) <= CAP
    assert meta["truncated"] is True and meta["title"].endswith("[…]") and meta["chunks"] == 3
    assert text.startswith("# title0 title1") and TEXT in text
