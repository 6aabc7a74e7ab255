"""Any query string through ``KnowledgeBase.search``: hits, or a one-line ``KbctlError``; never another
exception, and never a hit from a namespace that was not asked for.

Two namespaces of one tenant share words (so every lane has something to find in both); each query
is searched in one of them, in every mode. File names through a folder ingest are covered by
``test_isolation::test_property_no_traceback_and_the_invariant`` (random names, the invariant).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kbctl.errors import KbctlError
from tests.filetree import make_tree

DOCS = {
    "left": {
        "refunds.md": "# Refunds\n\nRefunds are processed within 5 business days. Café, naïve, 東京.\n",
        "errors.md": "# Errors\n\nError E-1042 (timeout) means the gateway did not answer: retry after 30s.\n",
    },
    "right": {"secret.md": "# Secret\n\nRefunds, errors and timeouts of another team: E-1042 too.\n"},
}
MODES = ("auto", "dense", "lexical", "hybrid")


@pytest.fixture
def two(kb, tmp_path):
    for ns, files in DOCS.items():
        kb.ingest([str(make_tree(tmp_path / ns, files))], namespace=ns, verify=False)
    return kb


_queries = st.one_of(
    st.text(max_size=40),  # any unicode: NUL, lone surrogates, controls, RTL marks
    st.text(st.sampled_from(list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n")), max_size=30),  # punctuation only
    st.lists(
        st.sampled_from(["refunds", "E-1042", "OR", "AND", "NOT", "*", '"', "'", ":", "-", "東京", "café"]), max_size=8
    ).map(" ".join),  # query-language look-alikes
    st.text(min_size=2000, max_size=6000).map(lambda s: (s + " refunds ") * 3),  # very long
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(query=_queries, ns=st.sampled_from(sorted(DOCS)), mode=st.sampled_from(MODES))
@example(query="", ns="left", mode="auto")
@example(query="\x00", ns="right", mode="lexical")
@example(query="\ud800", ns="left", mode="hybrid")
@example(query="refunds", ns="left", mode="hybrid")
def test_any_query_gives_hits_of_its_namespace_or_one_line_error(two, query, ns, mode):
    try:
        result = two.search(query, ns, mode=mode)
    except KbctlError as e:  # an empty query without a filter, say: one line, exit 1 or 2
        assert e.message and "\n" not in e.message and e.exit_code in (1, 2), e.message
        return
    assert result.hits or query != "refunds", "the lanes find nothing: the property would hold vacuously"
    assert all(h.namespace == ns for h in result.hits), (ns, [(h.namespace, h.source) for h in result.hits])
    assert all(h.source.rsplit("/", 1)[-1] in DOCS[ns] for h in result.hits), [h.source for h in result.hits]
