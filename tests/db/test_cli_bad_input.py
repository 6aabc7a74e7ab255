"""Bad input through the CLI (a config key, a search option, a tenant, a URL): one line and an exit code, never an empty answer or a traceback (docs/hardening.md)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import read_only_kb


def test_a_negative_k_in_the_profile_is_one_line_not_an_empty_result(kb, cli, tmp_path):
    """``[profile.search] k = -3`` once made every search of an existing namespace return nothing, exit 0."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "refunds.md").write_text("# Refunds\n\nRefunds are processed within five business days.\n")
    kb.ingest([str(d)], namespace="docs", verify=False)
    assert cli("search", "refunds", "-n", "docs", "--json").returncode == 0
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profile.search]\nk = -3\n")
    r = cli("--config", str(cfg), "search", "refunds", "-n", "docs", "--json")
    stderr = r.stderr.decode()
    assert r.returncode == 2 and r.stdout == b"", (r.returncode, r.stdout, stderr)
    lines = stderr.strip().splitlines()
    assert "search.k" in lines[0] and "Traceback" not in stderr, stderr
    assert len(lines) == 2 and lines[1].startswith("hint: "), stderr  # one error line and its hint


# -- the same defects through the CLI only, so the test reads the same before and after the fixes ---

DOCS = {
    "refunds.md": "---\nauthor: Ann\nprice: 12\n---\n# Refunds\n\nRefunds are processed within five business days.\n"
}


#: The tenant of ``docs``, made once for the module.
DOCS_TENANT = "t_cli_bad_input_docs"


def _ingest_docs(kb, root) -> None:
    d = root / "docs"
    d.mkdir()
    for name, text in DOCS.items():
        (d / name).write_text(text)
    kb.ingest([str(d)], namespace="docs", verify=False)


@pytest.fixture(scope="module")
def _docs(kb_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-bad-input")
    yield from read_only_kb(kb_home, DOCS_TENANT, lambda kb: _ingest_docs(kb, root), "give it own_docs")


@pytest.fixture
def docs(_docs):
    """The namespace ``docs``, made once for the module in a tenant of its own (``cli`` runs there
    for the tests given it): they are refused, search or show; none writes (its teardown asserts the
    namespaces, documents and chunks unchanged)."""
    return _docs


@pytest.fixture
def own_docs(kb, tmp_path):
    """The namespace ``docs`` in this test's own tenant, for a test that writes beside it."""
    _ingest_docs(kb, tmp_path)
    return kb


@pytest.fixture
def cli(cli, request):
    """conftest's ``cli``, in ``docs``'s tenant for a test given ``docs``."""
    if "docs" not in request.fixturenames:
        return cli

    def run(*args: str, tenant_override: str | None = None, **kw):
        return cli(*args, tenant_override=tenant_override or DOCS_TENANT, **kw)

    return run


def _one_line_usage(p) -> str:
    stderr = p.stderr.decode()
    lines = stderr.strip().splitlines()
    assert p.returncode == 2 and p.stdout == b"", (p.returncode, p.stdout[:300], stderr)
    assert "Traceback" not in stderr and lines[0].startswith("error: ") and len(lines) <= 2, stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ("-k", "-5"),
        ("-k", "0"),
        ("--per-doc", "-1"),
        ("--filter", "author in ,"),
        ("--filter", "price<=1e999"),
    ],
    ids=lambda a: " ".join(a),
)
def test_bad_search_input_is_a_usage_error(docs, cli, args):
    _one_line_usage(cli("search", "refunds", "-n", "docs", "--json", *args))


def test_empty_tenant_is_a_usage_error(docs, cli):
    _one_line_usage(cli("--tenant", "", "search", "refunds", "-n", "docs", "--json"))


@pytest.mark.parametrize(
    "content", [b'[defaults]\ntenant = "caf\xe9"\n', b"[profile.hnsw]\nm = 1\n"], ids=["not-utf8", "hnsw-m-1"]
)
def test_bad_config_is_one_line(docs, cli, tmp_path, content):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_bytes(content)
    _one_line_usage(cli("--config", str(cfg), "search", "refunds", "-n", "docs", "--json"))


def test_a_loopback_url_is_refused_and_recorded(kb, cli, tmp_path):
    """SSRF: a URL on this machine is not fetched by default; the refusal is one ledger row."""
    from http.server import BaseHTTPRequestHandler

    from tests.httpserve import serving

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html><body><p>zqxloopbackmarker private words of a local service</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    with serving(Page) as url:
        p = cli("-p", "hash-384", "ingest", f"{url}/admin", "-n", "web", "--json", "--no-verify")
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["documents"]["new"] == 0 and report["documents"]["failed"] == 1, report
    assert [e["stage"] for e in report["errors"]] == ["fetch"], report["errors"]


def test_a_plan_does_not_send_the_user_to_a_ledger_it_never_wrote(cli, tmp_path):
    """``--plan`` writes nothing, yet its warning said "see `kbctl errors -n NS`": for a new
    namespace that command fails (no such namespace), for an old one it shows another run's rows."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "good.md").write_text("# Good\n\nA good file.\n")
    (d / "bad.txt").write_bytes(b"\x00\x01binary")
    p = cli("-p", "hash-384", "ingest", str(d), "-n", "planned", "--plan", "--json")
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["plan"] and report["documents"]["failed"] == 1
    stderr = p.stderr.decode()
    assert "1 item(s) would fail" in stderr and "kbctl errors" not in stderr, stderr
    assert cli("errors", "-n", "planned").returncode == 2  # nothing was written: no such namespace


def test_a_file_that_fails_to_extract_keeps_its_hint_in_the_ledger(cli, tmp_path):
    """README: a failed item is one ledger line "with its hint after a `;` when it has one". A
    fetch error kept it; an extract error (a corrupt PDF, text that is not UTF-8) lost it, so
    `kbctl errors` named the problem without saying what to do."""
    from kbctl.errors import ExtractError
    from kbctl.extract import extract
    from kbctl.types import Source

    d = tmp_path / "docs"
    d.mkdir()
    (d / "good.md").write_text("# Good\n\nA good file.\n")
    (d / "latin1.txt").write_bytes("Caf\xe9 cr\xe8me".encode("latin-1"))
    (d / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\n")
    hints = {}
    for f in ("latin1.txt", "broken.pdf"):
        with pytest.raises(ExtractError) as e:
            extract(Source(uri=(d / f).as_uri(), content=(d / f).read_bytes()))
        assert e.value.hint
        hints[(d / f).as_uri()] = f"{e.value.message}; {e.value.hint}"
    p = cli("-p", "hash-384", "ingest", str(d), "-n", "hinted", "--json", "--no-verify")
    assert p.returncode == 0, p.stderr.decode()
    assert {e["source"]: e["message"] for e in json.loads(p.stdout)["errors"]} == hints
    ledger = json.loads(cli("errors", "-n", "hinted", "--json").stdout)
    assert {e["source"]: e["message"] for e in ledger} == hints


def test_a_target_too_long_for_a_path_is_a_recorded_item_not_a_traceback(cli, tmp_path):
    """A URL of thousands of characters, or a path with a name over 255 bytes: ``Path.is_dir()``
    raised ENAMETOOLONG ("File name too long") while the run worked out what ``--sync`` covers,
    and the command ended in a traceback with nothing stored."""
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nA good file about zinc.\n")
    long_url = "http://127.0.0.1:9/" + "p" * 5000
    long_path = str(tmp_path / ("x" * 300))
    p = cli("-p", "hash-384", "ingest", str(good), long_url, long_path, "-n", "toolong", "--json", "--no-verify")
    stderr = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in stderr, stderr[-2000:]
    report = json.loads(p.stdout)
    assert report["documents"]["new"] == 1 and len(report["errors"]) == 2, report
    for e in report["errors"]:
        assert e["stage"] == "fetch" and "\n" not in e["message"], e


@pytest.mark.parametrize("command", ["runs", "errors"])
@pytest.mark.parametrize("limit", ["-1", "0"])
def test_a_limit_out_of_range_is_a_usage_error(docs, cli, command, limit):
    """``--limit -1`` reached PostgreSQL ("database error: LIMIT must not be negative", exit 1);
    ``--limit 0`` printed "(none)" over a ledger that holds rows, exit 0. As ``-k``: exit 2."""
    line = _one_line_usage(cli(command, "-n", "docs", "--limit", limit, "--json"))
    assert "--limit" in line, line


@pytest.mark.parametrize("lease", ["inf", "nan", "1e300"])
def test_a_lease_that_is_not_a_sane_number_of_seconds_is_a_usage_error(docs, cli, tmp_path, lease):
    """``--lease inf`` (or ``1e300``) passed the "positive" check and reached PostgreSQL as an
    interval: "database error: interval out of range", the run failed, exit 1; ``nan`` passed too."""
    d = tmp_path / "more"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nA file for the workers.\n")
    line = _one_line_usage(cli("ingest", str(d), "-n", "docs", "--workers", "1", "--lease", lease, "--json"))
    assert "--lease" in line, line
    line = _one_line_usage(cli("worker", "-n", "docs", "--lease", lease, "--exit-idle"))
    assert "--lease" in line, line


@pytest.mark.parametrize(
    "args, named, value",
    [
        (("ingest", "{d}", "-n", "docs", "--workers", "-1"), "--workers", "-1"),
        (("ingest", "{d}", "-n", "docs", "--workers", "1", "--lease", "0"), "--lease", "0"),
        (("worker", "-n", "docs", "--lease", "0", "--exit-idle"), "--lease", "0"),
        (("worker", "-n", "docs", "--poll", "-2", "--exit-idle"), "--poll", "-2"),
        (("worker", "-n", "docs", "--batch", "0", "--exit-idle"), "--batch", "0"),
    ],
)
def test_a_work_queue_option_out_of_range_is_named_with_its_value_and_a_hint(docs, cli, tmp_path, args, named, value):
    """``--workers -1`` said "--workers must be 0 or more and --lease in (0, 86400] seconds" and
    ``kbctl worker --batch 0`` "--lease and --poll must be in … and --batch at least 1": every bound
    at once, not which option was out of range nor its value, and no hint line."""
    d = tmp_path / "more"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nA file for the workers.\n")
    error, hint = _refusal_with_hint(cli(*(a.format(d=d) for a in args)))
    assert error.startswith(f"error: {named} ") and error.endswith(f"got {value}"), error
    others = {"--workers", "--lease", "--poll", "--batch"} - {named}
    assert not [o for o in others if o in error], error
    assert named in hint, hint


@pytest.mark.parametrize("lease", ["30", "0"])
def test_a_lease_without_workers_is_refused_before_anything_is_made(docs, cli, tmp_path, lease):
    """``kbctl ingest … --lease 30`` without ``--workers`` ran in this process as if ``--lease`` had
    not been given (``--lease 0``, out of range, too): an option that did nothing, without a word."""
    d = tmp_path / "more"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nA file for the workers.\n")
    line, hint = _refusal_with_hint(cli("ingest", str(d), "-n", "leased", "--lease", lease))
    assert line == "error: --lease needs --workers", line
    assert "--workers" in hint, hint
    assert "leased" not in [n["name"] for n in docs.namespaces()]


def test_an_ingest_of_paths_that_do_not_exist_into_a_new_namespace_makes_nothing(own_docs, cli, tmp_path):
    """``kbctl ingest typo/ -n new`` (every target a local path that is not there) made the namespace
    ``new``, recorded a run of one failed item and exited 0 with a warning: a mistyped command left
    an empty namespace behind and a cron job saw success. Refused before anything is made (exit 2),
    the path named; a namespace that exists keeps the batch rule (a row, a warning, its documents)."""
    typo = tmp_path / "dcos"
    line, hint = _refusal_with_hint(cli("ingest", str(typo), "-n", "fresh"))
    assert line == f"error: no such file or folder: {typo}", line
    assert "nothing was made" in hint and "fresh" in hint, hint
    assert "fresh" not in [n["name"] for n in own_docs.namespaces()]
    # two targets, neither there: both named
    line, _ = _refusal_with_hint(cli("ingest", str(typo), str(tmp_path / "nope.md"), "-n", "fresh"))
    assert str(typo) in line and "nope.md" in line, line
    # one there, one not: the batch rule (the missing one is a failed item, the rest goes in)
    d = tmp_path / "real"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nA real file.\n")
    p = cli("ingest", str(d), str(typo), "-n", "fresh")
    assert p.returncode == 0, p.stderr.decode()
    assert "fresh" in [n["name"] for n in own_docs.namespaces()]
    # into a namespace that exists: the batch rule too (its documents are kept, exit 0 with a warning)
    p = cli("ingest", str(typo), "-n", "fresh")
    assert p.returncode == 0 and "1 item(s) failed" in p.stderr.decode(), p.stderr.decode()


@pytest.mark.parametrize(
    "args, flag",
    [
        (("search", "refunds", "-n", "docs", "-g", "--json"), "--group"),
        (("search", "refunds", "-n", "docs", "--as", "user:u1", "--group", "--json"), "--group"),
        (("search", "refunds", "-n", "docs", "--group=-k"), "--group"),
        (("search", "refunds", "-n", "docs", "--as", "--json"), "--as"),
        (("eval", "run", "golden.jsonl", "-n", "docs", "--as", "user:u1", "-g", "--json"), "--group"),
        (("eval", "run", "golden.jsonl", "-n", "docs", "--as", "-v"), "--as"),
    ],
)
def test_a_principal_option_given_no_value_is_refused_not_read_as_the_next_option(docs, cli, args, flag):
    """``kbctl search q -n docs -g --json`` searched as a member of the group ``--json`` and printed
    a table (click reads the word after an option as its value): no such group, and no JSON."""
    line, hint = _refusal_with_hint(cli(*args))
    assert line.startswith(f"error: {flag} needs a value; "), line
    prefix = "group:" if flag == "--group" else "user:"
    assert flag in hint and f"{prefix}-" in hint, hint  # how to name one that does begin with '-'


def test_a_group_whose_name_begins_with_a_dash_is_written_with_its_prefix(docs, cli):
    p = cli("search", "refunds", "-n", "docs", "--as", "user:-u1", "-g", "group:-ops", "--json")
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["hits"], p.stdout  # public documents: anyone sees them


def test_an_extractors_own_complaint_about_a_recorded_item_stays_off_stderr(cli_process, tmp_path):
    """A page of scripts only is a recorded item ("empty document"); trafilatura also logged
    "WARNING trafilatura.core: discarding data: None" for it, a second line of its own on stderr
    for something the run already says. The extraction libraries speak with -v only."""
    d = tmp_path / "pages"
    d.mkdir()
    (d / "scripts.html").write_text(
        "<html><head><script>var a=1;</script></head><body><script>x()</script></body></html>"
    )
    (d / "ok.md").write_text("# Ok\n\nSome text.\n")
    p = cli_process("ingest", str(d), "-n", "pages", "-p", "hash-384")
    assert p.returncode == 0, p.stderr.decode()  # an item failed: a warning, not an error without --strict
    err = p.stderr.decode()
    assert "trafilatura" not in err and "2 item(s)" not in err and "1 item(s) failed" in err, err
    p = cli_process("-v", "ingest", str(d), "-n", "pages2", "-p", "hash-384")
    assert "trafilatura" in p.stderr.decode()  # still there for whoever asks


def _refusal_with_hint(p) -> tuple[str, str]:
    """A usage refusal (exit 2, nothing on stdout): its error line and its hint line."""
    stderr = p.stderr.decode()
    lines = stderr.strip().splitlines()
    assert p.returncode == 2 and p.stdout == b"" and "Traceback" not in stderr, (p.returncode, stderr)
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), stderr
    return lines[0], lines[1]


@pytest.mark.parametrize("flag", ["--drop-old", "--drop-shadow"])
def test_a_drop_with_nothing_to_drop_says_what_to_run_instead(docs, cli, flag):
    """``reembed --drop-old`` (``--drop-shadow``) with no previous (shadow) generation said so with
    no hint, where the other refusals of reembed have one."""
    line, hint = _refusal_with_hint(cli("reembed", "docs", flag))
    assert "nothing to drop" in line, line
    assert "kbctl reembed docs --status" in hint, hint


def test_a_plan_with_workers_says_what_to_run_instead(docs, cli, tmp_path):
    """``ingest --plan --workers 2`` was refused with no hint."""
    d = tmp_path / "more"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nA file for the workers.\n")
    line, hint = _refusal_with_hint(cli("ingest", str(d), "-n", "docs", "--plan", "--workers", "2"))
    assert "--plan" in line and "--workers" in line, line
    assert "without --workers" in hint, hint


def test_show_in_a_namespace_that_does_not_exist_says_so(docs, cli):
    """``kbctl show -n NO_SUCH_NS 28`` said "chunk 28 is not available", where ``kbctl search -n
    NO_SUCH_NS`` says the namespace does not exist and names the known ones. The operator's CLI
    says so; a chunk not in a namespace that exists is still "not available"."""
    line, hint = _refusal_with_hint(cli("show", "28", "-n", "no_such_ns"))
    assert "namespace 'no_such_ns' does not exist" in line, line
    assert "docs" in hint, hint
    line, _ = _refusal_with_hint(cli("show", "28", "-n", "docs", "-n", "no_such_ns"))
    assert "namespace 'no_such_ns' does not exist" in line, line
    searched = _one_line_usage(cli("search", "refunds", "-n", "no_such_ns"))
    assert searched == line, (searched, line)
    p = cli("show", "99999999", "-n", "docs")
    assert p.returncode == 2 and b"chunk 99999999 is not available" in p.stderr, p.stderr


@pytest.mark.parametrize("typed", ["abc", "28.0", "0x1c", "", " ", "C_" + "A" * 22, "\u0663", "\u00b2", "c-12"])
def test_show_of_a_mistyped_chunk_id_says_which_ids_it_takes(docs, cli, typed):
    """``kbctl show abc`` (a person typed a chunk id wrong) said "'abc' is not an id tenant 'default'
    gave out", with a hint about an agent's opaque ids: a number or a ``c_…`` id is what it takes,
    and the chunk_id of a search hit is where one is found. '٣' (an Arabic-Indic 3) was chunk 3."""
    line, hint = _refusal_with_hint(cli("show", typed, "-n", "docs"))
    assert line == f"error: {typed!r} is not a chunk id: kbctl show takes a chunk's number or its opaque id (c_…)", line
    assert "chunk_id" in hint and "kbctl search" in hint and "--json" in hint, hint
    assert "tenant" not in line + hint and "agent sent" not in hint, (line, hint)


@pytest.mark.parametrize(
    "args",
    [("-1", "-n", "docs"), ("-n", "docs", "-28"), ("-n", "docs", "--json", "-1.5"), ("-n", "docs", "--", "-1")],
)
def test_show_of_a_negative_number_says_which_ids_it_takes(docs, cli, args):
    """``kbctl show -1`` was read as an option (``no such option: -1``, hint ``see 'kbctl show -h'``):
    a negative number where the chunk id goes is a chunk id typed wrong, told as ``abc`` is, with its
    exit code; a namespace named like one is still the option's value, an unknown option unknown."""
    typed = args[-1] if args[-1] != "docs" else args[0]
    p = cli("show", *args)
    line, hint = _refusal_with_hint(p)
    assert line == f"error: {typed!r} is not a chunk id: kbctl show takes a chunk's number or its opaque id (c_…)", line
    assert "chunk_id" in hint and "kbctl search" in hint, hint
    assert p.returncode == cli("show", "abc", "-n", "docs").returncode == 2
    named = cli("show", "1", "-n", "-1")
    assert named.returncode == 2 and b"error: namespace name: '-1' is not a valid name" in named.stderr, named.stderr
    line, _ = _refusal_with_hint(cli("show", "1", "-x", "-n", "docs"))
    assert line == "error: no such option: -x", line


def test_show_of_an_opaque_id_that_does_not_open_keeps_the_opaque_wording(docs, cli):
    """An input shaped like an opaque id (another tenant's, cut, or mistyped) is still told as one:
    it opens only under the tenant that gave it; a document's id is not a chunk's."""
    ids = docs.ids()
    for token in ("c_" + "A" * 22, "c_abc"):
        line, hint = _refusal_with_hint(cli("show", token, "-n", "docs"))
        assert f"{token!r} is not an id tenant" in line and "--tenant" in hint, (line, hint)
    line, hint = _refusal_with_hint(cli("show", ids.seal("d", 5), "-n", "docs"))
    assert "is a document's id, not a chunk's" in line and "chunk_id" in hint, (line, hint)
    hit = json.loads(cli("search", "refunds", "-n", "docs", "--json").stdout)["hits"][0]
    number = cli("show", str(hit["chunk_id"]), "-n", "docs", "--json")
    opaque = cli("show", ids.seal("c", hit["chunk_id"]), "-n", "docs", "--json")
    assert number.returncode == opaque.returncode == 0, (number.stderr, opaque.stderr)
    assert json.loads(number.stdout) == json.loads(opaque.stdout)


@pytest.mark.parametrize("typed", ["\u0663", "\u00b2", "28.0"])
def test_the_library_takes_only_ascii_digits_for_an_id(docs, typed):
    """``kb.chunk("٣")`` read chunk 3 ('٣'.isdigit(), int('٣') == 3) and ``kb.chunk("²")`` raised
    int's ValueError: an id given as a string is its ASCII digits, else the UsageError."""
    from kbctl.errors import UsageError

    for read in (docs.chunk, docs.document):
        with pytest.raises(UsageError, match="id is a whole number"):
            read(typed, ["docs"])


def test_an_eval_of_a_generation_the_namespace_lacks_says_what_to_run_instead(docs, cli, tmp_path):
    """``eval run --generation shadow`` and ``reembed --eval`` with no shadow generation said so with no hint."""
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q1", "query": "refunds", "relevant": {"refunds.md": 1}}) + "\n")
    line, hint = _refusal_with_hint(cli("eval", "run", str(golden), "-n", "docs", "--generation", "shadow"))
    assert "no shadow generation" in line and "kbctl reembed docs --status" in hint, (line, hint)
    line, hint = _refusal_with_hint(cli("reembed", "docs", "--eval", str(golden)))
    assert "no shadow generation" in line and "kbctl reembed docs --profile" in hint, (line, hint)
