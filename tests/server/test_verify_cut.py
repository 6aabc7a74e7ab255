"""verify_claim's answer is cut to ``[server] max_output_tokens`` and has no cursor: the passages that
support the claim must be in it whenever ``evidence_found`` is true (a supporting passage ranked
below the cut was dropped, so the answer said evidence_found with no passage to show for it)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

from kbctl.config import load_settings
from kbctl.ids import Ids
from kbctl.search.evidence import Research
from kbctl.server.agents import Agent
from kbctl.server.metrics import Metrics
from kbctl.server.tools import Toolbox
from kbctl.types import Hit, SearchResult

IDS = Ids(b"k" * 32)  # the tenant's opaque ids (kbctl.ids)

WORDS = " ".join(f"word{i}" for i in range(75))  # 200 estimated tokens a passage (word, number)


def _check(supporting: int, n: int = 12):
    hits = tuple(
        Hit(i + 1, 1.0 - i / 100, 100 + i, 200 + i, f"d{i}.md", f"D{i}", WORDS, "kb", {}, f"d{i}.md") for i in range(n)
    )
    signals = [
        {
            "dense_similarity": 0.4,
            "key_terms_found": 0.2,
            "matched_terms": [],
            "lane_agreement": 0.5,
            "supports": i == supporting,
        }
        for i in range(n)
    ]
    result = SearchResult("claim", ("kb",), "hybrid", "hybrid", hits)
    return SimpleNamespace(
        result=result, signals=signals, key_terms=["word1"], evidence_found=True,
        thresholds={"dense_similarity": 0.53, "key_terms_found": 0.45},
    )  # fmt: skip


class _Service:
    server = load_settings(overrides={"server.max_output_tokens": 2000, "server.log_queries": False}, env={}).server

    def __init__(self, check):
        self.check = check

    @contextlib.contextmanager
    def kb(self, tenant=None, made_for=None):
        yield SimpleNamespace(namespace_names=lambda: ["kb"], verify_claim=lambda claim, scope, **o: self.check)

    def ids(self, tenant=None):
        return IDS


def test_a_supporting_passage_below_the_cut_is_in_the_answer():
    box = Toolbox(_Service(_check(supporting=10)), Agent(), Metrics())  # type: ignore[arg-type]
    answer = box.verify_claim("claim")
    shown = answer.evidence
    assert answer.evidence_found and len(shown) < 12  # cut by max_output_tokens
    assert any(e.signals.supports for e in shown), [e.rank for e in shown]
    assert [e.rank for e in shown] == sorted(e.rank for e in shown)  # still in rank order


def test_an_answer_that_fits_is_whole():
    box = Toolbox(_Service(_check(supporting=1, n=3)), Agent(), Metrics())  # type: ignore[arg-type]
    answer = box.verify_claim("claim")
    assert [e.rank for e in answer.evidence] == [1, 2, 3]


class _ResearchService:
    def __init__(self, **server):
        over = {f"server.{k}": v for k, v in server.items()} | {"server.log_queries": False}
        self.server = load_settings(overrides=over, env={}).server
        self.calls: list[dict] = []

    @contextlib.contextmanager
    def kb(self, tenant=None, made_for=None):
        def research(topic, scope, **o):
            self.calls.append(o)
            result = SearchResult(topic, ("kb",), "hybrid", "hybrid", ())
            return Research(topic, result, [], [], [], [])

        yield SimpleNamespace(namespace_names=lambda: ["kb"], research=research)

    def ids(self, tenant=None):
        return IDS


def test_research_topic_stays_within_the_servers_limits():
    """research_topic asked for k = 20 and, without a budget, 4000 tokens, whatever [server] allows:
    with max_k = 10 (or max_budget = 2000) every call failed ("k must be at most 10")."""
    service = _ResearchService(max_k=10, max_budget=2000)
    answer = Toolbox(service, Agent(), Metrics()).research_topic("refunds")  # type: ignore[arg-type]
    assert answer.documents == [] and service.calls[0]["k"] == 10 and service.calls[0]["budget"] <= 2000


class _DocumentService:
    server = load_settings(overrides={"server.max_output_tokens": 300}, env={}).server

    @contextlib.contextmanager
    def kb(self, tenant=None, made_for=None):
        chunk = {"chunk_id": 5, "position": 0, "text": "知识库检索系统把文档切分成段落。" * 200}
        doc = {
            "id": 1, "doc_id": 1, "namespace": "kb", "uri": "mem://zh", "title": "中文", "metadata": {},
            "chunks": [chunk],
        }  # fmt: skip
        yield SimpleNamespace(namespace_names=lambda: ["kb"], document=lambda *a, **kw: dict(doc))

    def ids(self, tenant=None):
        return IDS


def test_a_resource_cut_to_the_cap_says_so_even_in_one_chunk():
    """A document of one chunk past max_output_tokens was cut (snipped) with truncated false, and a
    Chinese text was not cut at all (its estimate was a few tokens)."""
    from kbctl.search.context import estimate_tokens

    text, meta = Toolbox(_DocumentService(), Agent(), Metrics()).read_resource(f"kbctl://kb/{IDS.seal('d', 1)}")  # type: ignore[arg-type]
    assert meta["truncated"] is True
    assert estimate_tokens(text) <= 300
