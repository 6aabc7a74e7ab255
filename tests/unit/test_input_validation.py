"""Every input checked once, where the library receives it: a bad value is a UsageError (exit 2)
saying what is wrong, through ``KnowledgeBase`` and through the CLI's ``main`` alike; never a
traceback, an empty result with exit 0, or a value PostgreSQL silently ignores."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbctl.config import load_settings
from kbctl.errors import ConfigError, UsageError
from kbctl.search import parse_filters
from kbctl.types import Filter
from tests.conftest import main_in_process, read_only_kb
from tests.filetree import make_tree

DOCS = {
    "a": {
        "refunds.md": "# Refunds\n\nRefunds are processed within 5 business days.\n",
        "invoices.md": "---\nauthor: Ann\nprice: 12\n---\n# Invoices\n\nInvoices are issued monthly.\n",
    },
    "b": {"secret.md": "---\nauthor: Bob\nprice: 3\n---\n# Secret\n\nRefunds and invoices of another team.\n"},
}


#: The tenant of ``two``'s namespaces, made once for the module.
TWO = "t_input_validation_two"


@pytest.fixture(scope="module")
def _two(kb_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("two")

    def fill(kb) -> None:
        for ns, files in DOCS.items():
            kb.ingest([str(make_tree(root / ns, files))], namespace=ns, verify=False)

    yield from read_only_kb(kb_home, TWO, fill, "give it a kb of its own")


@pytest.fixture
def two(_two):
    """Two namespaces of one tenant, ``a`` and ``b``: made once for the module, in a tenant of its
    own (``run_main`` runs in it for the tests given ``two``); its tests only search them or are
    refused (its teardown asserts the documents and chunks unchanged)."""
    return _two


@pytest.fixture
def run_main(kb_home, tenant, capsys, request):
    """The CLI's main() in this process: (exit code, stdout, stderr); in ``two``'s tenant for a
    test given ``two``, else in the test's own."""
    default = TWO if "two" in request.fixturenames else tenant

    def run(*args, tenant_=default):
        return main_in_process(capsys, ["--home", str(kb_home), "--tenant", tenant_, "--profile", "hash-384", *args])

    return run


def _usage(run, *args, **kw) -> str:
    code, out, err = run(*args, **kw)
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and err.startswith("error: "), err
    return err


# -- search options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, what",
    [
        ({"k": -5}, "k"),
        ({"k": 0}, "k"),
        ({"k": 1001}, "k"),
        ({"per_doc": -1}, "per_doc"),
        ({"candidates": 0}, "candidates"),
        ({"ef_search": 0}, "ef_search"),
        ({"ef_search": 1001}, "ef_search"),
        ({"k": True}, "k"),
        ({"k": 2.5}, "k"),
    ],
)
def test_search_options_out_of_range_are_usage_errors(two, options, what):
    with pytest.raises(UsageError, match=what):
        two.search("refunds", "a", **options)


@pytest.mark.parametrize("query", ["refund\x00x", "refund\udcff", "\ud800"])
def test_a_query_that_is_not_text_is_a_usage_error(two, query):
    """A NUL (PostgreSQL's text holds none: the audit and query logs failed on it) or a byte that
    is not UTF-8 (a shell argument arrives as a lone surrogate; the embedder failed on it, and the
    JSON on stdout was not UTF-8) is refused before the search, with what to do."""
    with pytest.raises(UsageError, match="query") as e:
        two.search(query, "a")
    assert e.value.hint


def test_a_query_byte_that_is_not_utf8_through_the_cli(two, run_main):
    err = _usage(run_main, "search", "refund\udcff", "-n", "a", "--json")
    assert "UTF-8" in err
    err = _usage(run_main, "search", "refund", "-n", "a", "-f", "source_type=\udcff")
    assert "UTF-8" in err


def test_an_unknown_output_format_is_a_usage_error(two, run_main):
    assert "format" in _usage(run_main, "search", "refunds", "-n", "a", "--format", "bogus")


def test_retriever_defaults_are_checked_when_it_is_made(two):
    with pytest.raises(UsageError, match="k"):
        two.retriever("a", k=-3)
    with pytest.raises(UsageError, match="k"):
        two.retriever("a").search("refunds", k=0)


@pytest.mark.parametrize(
    "args, what",
    [
        (("-k", "-5"), "k"),
        (("-k", "0"), "k"),
        (("--per-doc", "-1"), "per-doc"),
        (("--ef-search", "1001"), "ef-search"),
        (("--format", "context", "--budget", "0"), "budget"),
        (("--budget", "0"), "budget"),  # was accepted (and ignored) without --format context
        (("--ef-search", "0"), "ef-search"),
        (("-k", "abc"), "-k"),
    ],
)
def test_search_options_through_the_cli(two, run_main, args, what):
    """One error line naming the option, and a hint (``-k 0`` had none; typer's checks printed
    click's usage block first)."""
    err = _usage(run_main, "search", "refunds", "-n", "a", *args)
    lines = err.splitlines()
    assert len(lines) == 2 and what in lines[0] and lines[1].startswith("hint: "), err


def test_budget(two):
    res = two.search("refunds", "a")
    with pytest.raises(UsageError, match="budget"):
        two.context(res, -1)


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", " ", "a b", "-x", "x" * 200, "a/b", "ä"])
def test_namespace_names(kb, tmp_path, name):
    with pytest.raises(UsageError, match="namespace"):
        kb.search("refunds", name)
    (tmp_path / "a.md").write_text("hello")
    with pytest.raises(UsageError, match="namespace"):
        kb.ingest([str(tmp_path / "a.md")], namespace=name)


def test_empty_tenant(kb_home, run_main):
    import kbctl

    with pytest.raises(UsageError, match="tenant"):
        kbctl.open(home=kb_home, tenant="", profile="hash-384").search("x", "a")
    with pytest.raises(UsageError, match="tenant"):
        kbctl.open(home=kb_home, tenant="a b", profile="hash-384").namespaces()
    assert "tenant" in _usage(run_main, "search", "refunds", "-n", "a", tenant_="")


# -- filters ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "author in ,",
        "author in a,,b",
        "author in  , ",
        "price<=1e999",
        "price>-1e999",
        "price>=nan",
        "price<inf",
        "price<=-Infinity",
        # so small a 64-bit float holds it as 0 (PostgreSQL's numeric refused 1e-999999 as a database error)
        "price>1e-999999",
        "price<=-0.5e-400",
    ],
)
def test_bad_filters(two, run_main, text):
    with pytest.raises(UsageError):
        parse_filters([text])
    with pytest.raises(UsageError):
        two.search("refunds", "a", filters=[text])
    _usage(run_main, "search", "refunds", "-n", "a", "--filter", text)


def test_exponent_numbers_compare_as_numbers(two):
    assert [h.title for h in two.search("", "a", filters=["price>=1.1e1"]).hits] == ["Invoices"]
    assert [h.title for h in two.search("", "a", filters=["price<1e1"]).hits] == []


# -- configuration ---------------------------------------------------------------------------------


def test_config_not_utf8(tmp_path, run_main):
    bad = tmp_path / "kbctl.toml"
    bad.write_bytes(b'[defaults]\ntenant = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_settings(bad)
    assert "UTF-8" in _usage(run_main, "--config", str(bad), "namespaces")


# -- vectors given to kbctl store ------------------------------------------------------------------


def _embedded(kb, tmp_path) -> list[dict]:
    (tmp_path / "v").mkdir()
    for i in range(4):
        (tmp_path / "v" / f"d{i}.md").write_text(f"# Doc {i}\n\nText number {i} about refunds.\n")
    lines = [json.dumps(r) for r in kb.fetch_records([str(tmp_path / "v")])]
    lines = [json.dumps(r) for r in kb.extract_records(lines)]
    lines = [json.dumps(r) for r in kb.chunk_records(lines, profile="hash-384")]
    return list(kb.embed_records(lines, profile="hash-384"))


BAD_VECTORS = {
    "nan": lambda v: [math.nan, *v[1:]],
    "inf": lambda v: [math.inf, *v[1:]],
    "zero": lambda v: [0.0] * len(v),
    "dimension": lambda v: v[:-1],
}


def test_bad_vectors_are_item_errors(kb, tmp_path):
    records = _embedded(kb, tmp_path)
    for rec, bad in zip(records, BAD_VECTORS.values()):
        rec["embeddings"] = [bad(v) for v in rec["embeddings"]]
    report = kb.store_records([json.dumps(r, allow_nan=True) for r in records], "vec")
    assert report.documents["failed"] == 4 and report.documents["new"] == 0
    assert {e.stage for e in report.errors} == {"store"}
    assert kb.namespaces()[0]["chunks"] == 0
    assert len(kb.errors("vec")) == 4


def test_bad_vectors_through_the_cli(kb, tmp_path, run_main, monkeypatch):
    import io

    records = _embedded(kb, tmp_path)
    records[0]["embeddings"] = [[0.0] * len(v) for v in records[0]["embeddings"]]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(json.dumps(r) + "\n" for r in records)))
    code, out, err = run_main("store", "-n", "vec")
    assert code == 0 and "Traceback" not in err, err
    report = json.loads(out)
    assert report["documents"]["failed"] == 1 and report["documents"]["new"] == 3, report
    assert "zero" in report["errors"][0]["message"]


# -- any filter expression: typed filters or a UsageError, and never another namespace's hits ------

TOKENS = [
    "author",
    "price",
    "tags",
    "date",
    "a.b",
    "=",
    "!=",
    ">=",
    "<=",
    ">",
    "<",
    "~",
    " in ",
    ",",
    "'",
    '"',
    " ",
    "1",
    "-2",
    "3.5",
    "1e999",
    "-1e999",
    "1e3",
    "inf",
    "nan",
    "Infinity",
    "Ann",
    "Bob",
    "2024-01-01",
    "2024-02-30",
    "%",
    "_",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=6).map("".join), min_size=1, max_size=2))
def test_filters_parse_or_refuse_and_stay_in_their_namespace(two, texts):
    try:
        filters = parse_filters(texts)
    except UsageError:
        return
    assert all(isinstance(f, Filter) for f in filters)
    for query in ("", "refunds invoices"):
        try:
            res = two.search(query, "a", filters=texts)
        except UsageError:
            continue
        assert all(h.namespace == "a" for h in res.hits), (texts, res.hits)


# -- eval ------------------------------------------------------------------------------------------


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps({"id": "q1", "query": "refunds", "namespace": "a", "relevant": ["refunds.md"]}) + "\n")
    return path


@pytest.mark.parametrize(
    "args, what",
    [
        (("--modes", "bogus"), "bogus"),
        (("--modes", "hybrid,hybird"), "hybird"),
        (("--modes", ","), "modes"),
        (("--limit", "0"), "limit"),
        (("--limit", "-1"), "limit"),
        (("-k", "0"), "k"),
        (("--depth", "0"), "depth"),
        (("--tolerance", "-0.1"), "tolerance"),
    ],
)
def test_eval_run_options_are_checked_before_any_query(two, run_main, golden, args, what):
    """An unknown mode used to run as hybrid under its name (exit 0); --limit -1 dropped the last
    query, and 0 scored none, with exit 0."""
    assert what in _usage(run_main, "eval", "run", str(golden), *args)


def test_eval_run_library_checks_modes_and_limit(two, golden):
    with pytest.raises(UsageError, match="hybird"):
        two.evaluate(golden, modes=["hybird"])
    with pytest.raises(UsageError, match="limit"):
        two.evaluate(golden, limit=-1)


def test_eval_run_output_paths_are_checked_before_any_query(two, run_main, golden, tmp_path, monkeypatch):
    """A --json, --report or --junit path that cannot be written was a traceback after the whole
    evaluation had run."""
    from kbctl import evals

    monkeypatch.setattr(evals, "run_eval", lambda *a, **kw: pytest.fail("the evaluation ran"))
    missing = tmp_path / "no" / "such" / "dir" / "x.json"
    for flag, path in (("--json", missing), ("--report", tmp_path), ("--junit", missing)):
        err = _usage(run_main, "eval", "run", str(golden), "--modes", "lexical", flag, str(path))
        assert flag in err and str(path) in err


def test_a_golden_file_that_is_not_utf8_is_one_line(two, run_main, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe{\x00}\x00\n")
    err = _usage(run_main, "eval", "run", str(bad))
    assert "UTF-8" in err and str(bad) in err


def test_a_result_file_with_malformed_metrics_is_one_line(two, run_main, golden, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"modes": {"lexical": {"metrics": {"ndcg@10": 0.5}, "per_query": {}}}}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"modes": {"lexical": {"metrics": "x"}}}))
    assert str(bad) in _usage(run_main, "eval", "compare", str(good), str(bad))
    assert str(bad) in _usage(run_main, "eval", "run", str(golden), "--modes", "lexical", "--baseline", str(bad))


def test_a_refused_query_is_named_in_one_short_line(two):
    with pytest.raises(UsageError) as e:
        two.search("refund " * 5000 + "\x00", "a")
    assert len(e.value.message) < 300 and "\n" not in e.value.message
