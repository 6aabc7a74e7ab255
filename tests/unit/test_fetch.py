"""The fetch stage: folder walks, ignore rules, symlinks, limits, stdin, HTTP, feeds.

HTTP tests run against a ThreadingHTTPServer on 127.0.0.1 with an ephemeral port; nothing leaves
the machine. Loopback is refused by default (see test_fetch_policy.py), so their options opt in.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import re
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kbctl.errors import SourceError
from kbctl.ingest.fetch import (
    FetchOptions,
    FileFeedState,
    MemoryFeedState,
    fetch,
    iter_files,
    list_items,
    list_uris,
)
from kbctl.sources import folder as folder_mod
from kbctl.sources.globs import compile_glob, parse_ignore
from kbctl.sources.options import guess_media_type
from kbctl.sources.url import _retry_after, backoff_delay, get
from kbctl.types import ItemError, Source
from tests.filetree import make_tree

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fetch"
FAST = FetchOptions(
    timeout=5, retries=2, backoff_base=0.001, backoff_jitter=0.0, retry_after_cap=0.01, allow_hosts=("127.0.0.1",)
)


def rels(items) -> list[str]:
    """``path`` metadata of the Sources (asserting there are no errors)."""
    items = list(items)
    errors = [i for i in items if isinstance(i, ItemError)]
    assert not errors, errors
    return [i.metadata["path"] for i in items]


# -- globs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, path, is_dir, expected",
    [
        ("*.md", "a.md", False, True),
        ("*.md", "deep/er/a.md", False, True),  # no slash: the name at any depth
        ("*.md", "a.txt", False, False),
        ("**/*.md", "a.md", False, True),  # **/ is zero or more folders
        ("**/*.md", "x/y/a.md", False, True),
        ("docs/*.md", "docs/a.md", False, True),
        ("docs/*.md", "docs/sub/a.md", False, False),  # * stays inside one segment
        ("docs/*.md", "other/docs/a.md", False, False),  # a slash anchors to the root
        ("drafts/**", "drafts/a/b.md", False, True),
        ("drafts/**", "drafts", True, True),  # names the folder itself, so it can be pruned
        ("drafts/**", "x/drafts/a.md", False, False),
        ("/top.md", "top.md", False, True),
        ("/top.md", "sub/top.md", False, False),
        ("build/", "build", True, True),
        ("build/", "build", False, False),  # trailing slash: folders only
        ("note?.md", "note1.md", False, True),
        ("note[!0-9].md", "note1.md", False, False),
        ("note[!0-9].md", "notex.md", False, True),
        ("a+b(1).md", "a+b(1).md", False, True),  # regex characters are literal
    ],
)
def test_glob_patterns(pattern, path, is_dir, expected):
    assert compile_glob(pattern).matches(path, is_dir) is expected


def test_a_character_class_the_regex_engine_refuses_matches_nothing(tmp_path):
    """``[z-a]`` (a reversed range) in ``.kbctlignore`` or ``--include``: re.error ended the walk of
    the whole folder with a logged traceback and a ledger line "bad character range z-a at position
    1" (class ``error``, no file, no hint). As in git and fnmatch, such a class matches nothing."""
    assert not compile_glob("[z-a].md").matches("b.md", False)
    make_tree(tmp_path, {"a.md": "a", "sub/b.md": "b", ".kbctlignore": "[z-a]\nsub/[9-0]*\n"})
    assert rels(fetch([str(tmp_path)])) == ["a.md", "sub/b.md"]
    assert rels(fetch([str(tmp_path)], exclude=["[z-a]"])) == ["a.md", "sub/b.md"]
    assert rels(fetch([str(tmp_path)], include=["[z-a]", "sub/**"])) == ["sub/b.md"]


def test_parse_ignore_skips_comments_and_blank_lines():
    rules = parse_ignore(["# a comment\n", "\n", "   \n", "*.tmp\n", "!keep.tmp\n", "logs/\n", "\\#literal\n"])
    assert [(r.text, r.negate, r.dir_only) for r in rules] == [
        ("*.tmp", False, False),
        ("keep.tmp", True, False),
        ("logs/", False, True),
        ("#literal", False, False),
    ]


# -- folders -------------------------------------------------------------------------------------


def test_walk_is_sorted_and_keeps_extractable_suffixes_only(tmp_path):
    make_tree(tmp_path, {"b.txt": "b", "a.md": "a", "c.py": "c", "sub/d.HTML": "d", "sub/e.bin": "e", "z.pdf": "z"})
    assert rels(fetch([str(tmp_path)])) == ["a.md", "b.txt", "sub/d.HTML", "z.pdf"]


def test_include_and_exclude_globs(tmp_path):
    make_tree(
        tmp_path, {"a.md": "", "b.txt": "", "docs/c.md": "", "docs/d.txt": "", "drafts/e.md": "", "x/drafts/f.md": ""}
    )
    root = str(tmp_path)
    assert rels(fetch([root], include=["**/*.md"])) == ["a.md", "docs/c.md", "drafts/e.md", "x/drafts/f.md"]
    assert rels(fetch([root], include=["**/*.md"], exclude=["drafts/**"])) == ["a.md", "docs/c.md", "x/drafts/f.md"]
    assert rels(fetch([root], exclude=["drafts"])) == ["a.md", "b.txt", "docs/c.md", "docs/d.txt"]
    assert rels(fetch([root], include=["docs/"])) == ["docs/c.md", "docs/d.txt"]  # a folder includes its files
    assert rels(fetch([root], include=["*.txt"])) == ["b.txt", "docs/d.txt"]


def test_excluded_folder_is_not_walked(tmp_path, monkeypatch):
    make_tree(tmp_path, {"a.md": "", "drafts/deep/b.md": ""})
    listed = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(Path(p).name) or real(p))
    assert rels(fetch([str(tmp_path)], exclude=["drafts/**"])) == ["a.md"]
    assert "drafts" not in listed and "deep" not in listed


def test_kbctlignore_with_dir_patterns_and_negation(tmp_path):
    make_tree(
        tmp_path,
        {
            ".kbctlignore": "# drafts and scratch files\n\ndrafts/\n*.tmp.md\ndocs/*\n!docs/keep.md\nold.md/\n",
            "a.md": "",
            "scratch.tmp.md": "",
            "drafts/b.md": "",
            "docs/c.md": "",
            "docs/keep.md": "",
            "old.md": "",  # a file: the rule "old.md/" names folders only
            "sub/old.md/d.md": "",  # a folder named old.md: ignored
            "sub/.kbctlignore": "!keep.tmp.md\nsecret.md\n",
            "sub/keep.tmp.md": "",  # re-included by the deeper file
            "sub/other.tmp.md": "",
            "sub/secret.md": "",
            "sub/deeper/secret.md": "",  # no slash in the rule: any depth below sub/
            "secret.md": "",  # sub's rules do not reach up
        },
    )
    assert rels(fetch([str(tmp_path)])) == ["a.md", "docs/keep.md", "old.md", "secret.md", "sub/keep.tmp.md"]


def test_hidden_files_and_folders_are_skipped(tmp_path):
    make_tree(tmp_path, {"a.md": "", ".hidden.md": "", ".git/b.md": "", "sub/.c.md": ""})
    assert rels(fetch([str(tmp_path)])) == ["a.md"]
    shown = FetchOptions(include_hidden=True)
    assert rels(fetch([str(tmp_path)], options=shown)) == [".git/b.md", ".hidden.md", "a.md", "sub/.c.md"]


def test_symlink_loop_terminates_and_yields_each_file_once(tmp_path, caplog):
    make_tree(tmp_path, {"a/x.md": "x", "b.md": "b"})
    (tmp_path / "a" / "loop").symlink_to(tmp_path, target_is_directory=True)  # a/loop -> root
    (tmp_path / "self").symlink_to("self")  # a link to itself: broken, not a folder
    with caplog.at_level("WARNING", logger="kbctl.sources.folder"):
        got = rels(fetch([str(tmp_path)]))
    assert got == ["a/x.md", "b.md"]
    assert "already walked" in caplog.text


def test_symlinked_folder_and_file_are_followed_with_walked_identity(tmp_path):
    make_tree(tmp_path / "store", {"v2/x.md": "two"})
    root = tmp_path / "kb"
    root.mkdir()
    (root / "current").symlink_to(tmp_path / "store" / "v2", target_is_directory=True)
    (root / "link.md").symlink_to(tmp_path / "store" / "v2" / "x.md")
    got = list(fetch([str(root)], options=FetchOptions(follow_symlinks=True)))  # they lead out of kb/
    assert [s.uri for s in got] == [f"file://{root}/current/x.md", f"file://{root}/link.md"]
    assert all(s.content == b"two" for s in got)
    inside = make_tree(tmp_path / "kb2", {"store/v2/x.md": "two"})
    (inside / "current").symlink_to(inside / "store" / "v2", target_is_directory=True)
    got = list(fetch([str(inside)], include=["current/"]))  # links inside the folder are followed by default
    assert [s.uri for s in got] == [f"file://{inside}/current/x.md"]


def test_unreadable_file_yields_item_error_and_walk_goes_on(tmp_path, monkeypatch):
    make_tree(tmp_path, {"a.md": "a", "locked.md": "no", "z.md": "z"})
    locked = str(tmp_path / "locked.md")

    def guarded_open(path, *args, **kwargs):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return builtins.open(path, *args, **kwargs)

    # tests run as root, where chmod 000 does not stop reads: fail the open of one file instead
    monkeypatch.setattr(folder_mod, "open", guarded_open, raising=False)
    got = list(fetch([str(tmp_path)]))
    assert [type(x).__name__ for x in got] == ["Source", "ItemError", "Source"]
    err = got[1]
    assert (err.stage, err.source, err.error_class) == ("fetch", f"file://{locked}", "SourceError")
    assert err.message == f"cannot read {locked}: permission denied"


def test_files_over_the_size_limit_are_item_errors(tmp_path):
    make_tree(tmp_path, {"big.md": "x" * 2048, "small.md": "ok"})
    got = list(fetch([str(tmp_path)], options=FetchOptions(max_file_bytes=1024)))
    assert isinstance(got[0], ItemError) and isinstance(got[1], Source)
    assert got[0].message.startswith(f"{tmp_path}/big.md is 2 KB, larger than the 1 KB limit (max_file_bytes); ")
    assert got[1].content == b"ok"


def test_a_file_named_directly_is_read_whatever_its_suffix(tmp_path):
    p = tmp_path / "notes.unknownext"
    p.write_bytes(b"hello")
    os.utime(p, (0, 1_700_000_000))
    (src,) = fetch([str(p)])
    assert src.uri == f"file://{p}" and src.kind == "file" and src.content == b"hello"
    assert src.media_type is None
    assert src.metadata == {"path": "notes.unknownext", "abs_path": str(p), "size": 5, "mtime": "2023-11-14T22:13:20Z"}


def test_a_gzipped_file_is_read_as_the_format_its_name_says_without_gz(tmp_path):
    """A folder's ``notes.md.gz`` was not taken (``.gz`` is no suffix kbctl reads) and one named
    directly was refused by extract as "binary file (… application/gzip)". A file that is gzip data
    is decompressed, its type taken from its name without ``.gz``; its uri stays the file's."""
    import gzip

    from kbctl.extract import detect_format, extract

    pdf = (Path(__file__).resolve().parent.parent / "fixtures" / "extract" / "report.pdf").read_bytes()
    html = b"<html><head><title>Packed</title></head><body><p>packed page</p></body></html>"
    inner = {
        "notes.md.gz": b"# Notes\n\nThe quaffle switch.\n",
        "report.txt.gz": b"plain report\n",
        "draft.md.gz": b"Words without a heading.\n",
        "page.html.gz": html,
        "sub/report.pdf.gz": pdf,
        "server.log.gz": b"not a format kbctl reads\n",  # its inner suffix is none kbctl reads: not taken
        "backup.tar.gz": b"x",  # nor an archive
    }
    for rel, data in inner.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(gzip.compress(data))
    (tmp_path / "plain.md").write_text("# Plain\n")
    got = {s.metadata["path"]: s for s in fetch([str(tmp_path)])}
    assert sorted(got) == [
        "draft.md.gz",
        "notes.md.gz",
        "page.html.gz",
        "plain.md",
        "report.txt.gz",
        "sub/report.pdf.gz",
    ]
    assert list_uris([str(tmp_path)]) == {s.uri for s in got.values()}
    for rel, fmt, media_type in [
        ("notes.md.gz", "markdown", "text/markdown"),
        ("report.txt.gz", "text", "text/plain"),
        ("page.html.gz", "html", "text/html"),
        ("sub/report.pdf.gz", "pdf", "application/pdf"),
    ]:
        src = got[rel]
        assert src.content == inner[rel] and src.uri == f"file://{tmp_path}/{rel}", rel
        assert src.media_type == media_type and detect_format(src) == fmt, rel
        assert src.metadata["size"] == (tmp_path / rel).stat().st_size  # the file's, as it lies on disk
    (notes,) = extract(got["notes.md.gz"])
    assert notes.title == "Notes" and "quaffle switch" in notes.text
    (page,) = extract(got["page.html.gz"])
    assert page.title == "Packed"
    (draft,) = extract(got["draft.md.gz"])
    assert draft.title == "draft"  # the name without its .gz and suffix, as for draft.md
    assert [d.metadata.get("page") or 1 for d in extract(got["sub/report.pdf.gz"])]
    # named directly, and gzip data under a name without .gz: read the same way
    (named,) = fetch([str(tmp_path / "notes.md.gz")])
    assert named.content == inner["notes.md.gz"] and named.media_type == "text/markdown"
    (tmp_path / "unnamed.md").write_bytes(gzip.compress(b"# Unnamed\n"))
    (unnamed,) = fetch([str(tmp_path / "unnamed.md")])
    assert unnamed.content == b"# Unnamed\n" and unnamed.media_type == "text/markdown"


def test_a_gzipped_file_keeps_to_the_size_limit_and_a_corrupt_one_is_recorded(tmp_path):
    """Decompressed, a file keeps to max_file_bytes (a bomb stops at the limit, never held whole);
    gzip data that does not decompress is recorded with its reason, and the rest of the batch goes in."""
    import gzip

    whole = gzip.compress(b"some text " * 100)
    files = {
        "a-bomb.md.gz": gzip.compress(b"a" * 5_000_000),
        "b-members.txt.gz": gzip.compress(b"b" * 60_000) * 2,
        "c-cut.md.gz": whole[:30],
        "d-garbage.md.gz": whole[:10] + b"\xff" * 40,
        "e-good.md.gz": gzip.compress(b"# Good\n"),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    bomb, members, cut, garbage, good = fetch([str(tmp_path)], options=FetchOptions(max_file_bytes=100_000))
    hint = "raise max_file_bytes (in bytes) in the [fetch] table of kbctl.toml"
    for err, name in ((bomb, "a-bomb.md.gz"), (members, "b-members.txt.gz")):
        assert isinstance(err, ItemError) and err.source == f"file://{tmp_path}/{name}", err
        assert err.message == (
            f"{tmp_path}/{name} is larger than the 97.7 KB limit (max_file_bytes) once decompressed; {hint}"
        )
    gzip_hint = "test it with `gzip -t FILE`: a file cut short by a copy or a download is read once it is whole"
    assert isinstance(cut, ItemError) and cut.message == (
        f"cannot read {tmp_path}/c-cut.md.gz: corrupt gzip file (cut short); {gzip_hint}"
    )
    assert isinstance(garbage, ItemError) and re.fullmatch(
        re.escape(f"cannot read {tmp_path}/d-garbage.md.gz: corrupt gzip file (")
        + r"Error -3 [^)]+\); "
        + re.escape(gzip_hint),
        garbage.message,
    ), garbage.message
    assert isinstance(good, Source) and good.content == b"# Good\n"


def test_a_gzipped_tar_archive_is_refused_as_an_archive(tmp_path):
    """kbctl reads no archive: a ``.tgz`` or ``.tar.gz`` named directly (a walk never takes one), or a
    ``.gz`` that holds a tar, is refused saying so, not read as the tar's bytes."""
    import gzip
    import tarfile

    member = tmp_path / "inside.md"
    member.write_text("# Inside\n")
    tar = tmp_path / "bundle.tar"
    with tarfile.open(tar, "w") as t:
        t.add(member, "inside.md")
    packed = gzip.compress(tar.read_bytes())
    for name in ("bundle.tgz", "bundle.tar.gz", "bundle.md.gz"):
        (tmp_path / name).write_bytes(packed)
    for name in ("bundle.tgz", "bundle.tar.gz", "bundle.md.gz"):
        (err,) = fetch([str(tmp_path / name)])
        assert isinstance(err, ItemError), (name, err)
        assert err.message == (
            f"cannot read {tmp_path}/{name}: a tar archive, which kbctl does not read;"
            f" unpack it (tar -xf {tmp_path}/{name} -C DIR) and ingest the folder"
        ), err.message


def test_a_plain_tar_archive_named_or_piped_is_refused_as_an_archive(tmp_path):
    """An uncompressed tar named directly or on stdin was read and refused by extract as "binary file
    (no text extractor for application/x-tar)" (on stdin "… application/octet-stream"), hint "…
    exclude other files", where a compressed one says it is an archive and how to unpack it."""
    (tmp_path / "bundle.tar").write_bytes(_tar_of(b"# Inside\n"))
    (tmp_path / "bundle.md").write_bytes(_tar_of(b"# Inside\n"))  # a tar, whatever its name says
    for name in ("bundle.tar", "bundle.md"):
        (err,) = fetch([str(tmp_path / name)])
        assert isinstance(err, ItemError) and err.message == (
            f"cannot read {tmp_path}/{name}: a tar archive, which kbctl does not read;"
            f" unpack it (tar -xf {tmp_path}/{name} -C DIR) and ingest the folder"
        ), err
    (piped,) = fetch(["-"], stdin=io.BytesIO(_tar_of(b"# Inside\n")))
    assert isinstance(piped, ItemError) and piped.message == (
        "cannot read stdin: a tar archive, which kbctl does not read; unpack it (… | tar -x -C DIR) and ingest the folder"
    ), piped


def test_relative_targets_give_absolute_normalised_uris(tmp_path, monkeypatch):
    make_tree(tmp_path, {"docs/a.md": "a"})
    monkeypatch.chdir(tmp_path)
    (src,) = fetch(["./docs/../docs"])
    assert src.uri == f"file://{tmp_path}/docs/a.md" and src.metadata["path"] == "a.md"
    (src,) = fetch([f"file://{tmp_path}/docs/a.md"])  # kbctl's own file uris are targets too
    assert src.content == b"a"


def test_missing_target_and_unsupported_scheme_are_item_errors(tmp_path):
    missing = tmp_path / "nope"
    got = list(fetch([str(missing), "ftp://example.org/x", str(make_tree(tmp_path / "ok", {"a.md": "a"}))]))
    assert got[0] == ItemError("fetch", f"file://{missing}", "SourceError", f"no such file or directory: {missing}")
    assert got[1].source == "ftp://example.org/x" and "unsupported scheme 'ftp'" in got[1].message
    assert isinstance(got[2], Source)


def test_a_shared_run_lists_the_missing_target_and_unsupported_scheme_as_fetch_does(tmp_path):
    missing, ok = tmp_path / "nope", make_tree(tmp_path / "ok", {"a.md": "a"})
    targets = [str(missing), "ftp://example.org/x", str(ok)]
    listed = list(list_items(targets))
    assert listed[:2] == list(fetch(targets))[:2]
    assert listed[1] == ItemError(
        "fetch", "ftp://example.org/x", "SourceError", "cannot fetch ftp://example.org/x: unsupported scheme 'ftp'"
    )
    assert listed[2] == (str(ok / "a.md"), "a.md")


def test_fetch_is_lazy(tmp_path, monkeypatch):
    make_tree(tmp_path, {f"{i}.md": str(i) for i in range(5)})
    opened = []

    def counting_open(path, *args, **kwargs):
        opened.append(path)
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(folder_mod, "open", counting_open, raising=False)
    it = fetch([str(tmp_path)])
    assert next(it).content == b"0"
    assert len(opened) == 1  # one file read per item yielded


def test_media_types():
    assert guess_media_type("a.md") == "text/markdown"
    assert guess_media_type("a.MBOX") == "application/mbox"
    assert guess_media_type("a.rss") == "application/rss+xml"
    assert guess_media_type("a.atom") == "application/atom+xml"
    assert guess_media_type("a.eml") == "message/rfc822"
    assert guess_media_type("dir.d/README") is None


def test_fetch_and_extract_share_one_media_type_table(tmp_path, monkeypatch):
    from kbctl.extract.detect import SUPPORTED_SUFFIXES
    from kbctl.extract.detect import guess_media_type as extract_guess

    monkeypatch.setattr("mimetypes.guess_type", lambda *a, **k: (None, None))  # not the host's table
    assert FetchOptions().extractable == SUPPORTED_SUFFIXES
    for suffix in SUPPORTED_SUFFIXES:
        assert guess_media_type("a" + suffix) == extract_guess("a" + suffix) is not None, suffix
    make_tree(tmp_path, {"page.xhtml": "<html/>", "feed.rdf": "<rdf:RDF/>"})
    assert {s.metadata["path"]: s.media_type for s in fetch([str(tmp_path)])} == {
        "feed.rdf": "application/rdf+xml",
        "page.xhtml": "application/xhtml+xml",
    }


def test_iter_files_and_list_uris_do_not_read_contents(tmp_path, monkeypatch):
    make_tree(tmp_path, {"a.md": "a", "b.rst": "b", "sub/c.txt": "c", "drafts/d.md": "d"})
    monkeypatch.setattr(folder_mod, "open", lambda *a, **k: pytest.fail("read a file"), raising=False)
    assert list(iter_files(tmp_path, (), ["drafts/**"], None)) == [tmp_path / "a.md", tmp_path / "sub/c.txt"]
    assert list(iter_files(tmp_path, (), (), [".rst"])) == [tmp_path / "b.rst"]
    uris = list_uris([str(tmp_path), str(tmp_path / "b.rst"), "-", "https://example.org/"], exclude=["drafts/**"])
    assert uris == {f"file://{tmp_path}/a.md", f"file://{tmp_path}/sub/c.txt", f"file://{tmp_path}/b.rst"}


def test_list_uris_matches_what_fetch_yields(tmp_path):
    make_tree(tmp_path, {"a.md": "a", "x/b.html": "b", ".h.md": "h", "y/z.py": "z"})
    assert list_uris([str(tmp_path)]) == {s.uri for s in fetch([str(tmp_path)])}


# -- stdin ---------------------------------------------------------------------------------------


def test_stdin_is_read_once_and_named_by_its_hash():
    data = b"# Notes\n\npiped in"
    got = list(fetch(["-", "-"], stdin=io.BytesIO(data)))
    src = got[0]
    digest = hashlib.sha256(data).hexdigest()
    assert src.uri == f"stdin:{digest[:16]}" and src.kind == "stdin" and src.content == data
    assert src.media_type is None and src.metadata["sha256"] == digest and src.metadata["size"] == len(data)
    assert isinstance(got[1], ItemError) and "already read" in got[1].message


def test_stdin_name_gives_the_uri_and_media_type():
    (src,) = fetch(["-"], stdin=io.BytesIO(b"x"), options=FetchOptions(stdin_name="notes.md"))
    assert (src.uri, src.media_type, src.metadata["name"]) == ("stdin:notes.md", "text/markdown", "notes.md")


def test_gzip_data_on_stdin_is_read_as_a_gzipped_file_is(tmp_path):
    """``gzip -c notes.md | kbctl ingest -`` kept the gzip bytes (extract refused them as a binary
    file, application/gzip) where ``kbctl ingest notes.md.gz`` reads the file it holds: stdin is
    sniffed the same way, within the same limit, with the same refusals."""
    import gzip
    import tarfile

    text = b"# Notes\n\npiped in, gzipped"
    packed = gzip.compress(text)
    (src,) = fetch(["-"], stdin=io.BytesIO(packed))
    digest = hashlib.sha256(text).hexdigest()
    assert src.content == text and src.uri == f"stdin:{digest[:16]}", src  # the source the text piped plain is
    assert src.metadata["sha256"] == digest and src.metadata["size"] == len(packed), src.metadata
    (named,) = fetch(["-"], stdin=io.BytesIO(packed), options=FetchOptions(stdin_name="notes.md.gz"))
    assert (named.content, named.media_type, named.uri) == (text, "text/markdown", "stdin:notes.md.gz")

    (bomb,) = fetch(["-"], stdin=io.BytesIO(gzip.compress(b"a" * 5000)), options=FetchOptions(max_file_bytes=1000))
    assert isinstance(bomb, ItemError) and bomb.source == "stdin:", bomb
    assert "stdin is larger than" in bomb.message and "once decompressed" in bomb.message, bomb.message
    (cut,) = fetch(["-"], stdin=io.BytesIO(packed[:-8]))
    assert isinstance(cut, ItemError) and "cannot read stdin: corrupt gzip file (cut short)" in cut.message, cut

    (tmp_path / "a.md").write_text("# A\n")
    with tarfile.open(tmp_path / "a.tar", "w") as tar:
        tar.add(tmp_path / "a.md", arcname="a.md")
    (archive,) = fetch(["-"], stdin=io.BytesIO(gzip.compress((tmp_path / "a.tar").read_bytes())))
    assert isinstance(archive, ItemError) and "cannot read stdin: a tar archive" in archive.message, archive
    assert "tar -xz" in archive.message, archive.message  # its hint, for a stream


def test_stdin_over_the_size_limit():
    (err,) = fetch(["-"], stdin=io.BytesIO(b"x" * 100), options=FetchOptions(max_file_bytes=10))
    assert isinstance(err, ItemError) and err.source == "stdin:" and "max_file_bytes" in err.message


# -- HTTP ----------------------------------------------------------------------------------------


class Server:
    """Routes ``path -> (status, headers, body)`` or a callable of the handler; counts requests."""

    def __init__(self) -> None:
        self.routes: dict = {}
        self.hits: Counter = Counter()
        self.headers: dict[str, list] = {}
        self.port = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the client hanging up on an oversize body is expected


def page(body: bytes | str, content_type: str = "text/html; charset=utf-8", **headers: str):
    body = body.encode() if isinstance(body, str) else body
    return 200, {"Content-Type": content_type, "Content-Length": str(len(body)), **headers}, body


@pytest.fixture
def server(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    srv = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            srv.hits[self.path] += 1
            srv.headers.setdefault(self.path, []).append(dict(self.headers))
            route = srv.routes.get(self.path, (404, {"Content-Type": "text/plain"}, b"not here"))
            status, headers, body = route(self) if callable(route) else route
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = QuietServer(("127.0.0.1", 0), Handler)
    srv.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield srv
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def test_page_200(server):
    server.routes["/page.html"] = page("<h1>Hi</h1>", ETag='"p1"', **{"Last-Modified": "Wed, 01 May 2024 12:00:00 GMT"})
    (src,) = fetch([server.url("/page.html")], options=FAST)
    assert src.uri == server.url("/page.html") and src.kind == "url" and src.content == b"<h1>Hi</h1>"
    assert src.media_type == "text/html"
    meta = dict(src.metadata)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta.pop("fetched_at"))
    assert meta == {
        "url": server.url("/page.html"),
        "status": 200,
        "content_type": "text/html; charset=utf-8",
        "charset": "utf-8",
        "etag": '"p1"',
        "last_modified": "Wed, 01 May 2024 12:00:00 GMT",
    }
    assert server.headers["/page.html"][0]["User-Agent"].startswith("kbctl/")


def test_redirect_gives_the_final_url_without_fragment(server):
    server.routes["/old"] = (301, {"Location": "/new.html#section", "Content-Length": "0"}, b"")
    server.routes["/new.html"] = page("new")
    (src,) = fetch([server.url("/old#top")], options=FAST)
    assert src.uri == server.url("/new.html") and src.content == b"new"
    assert src.metadata["url"] == server.url("/old")


def test_404_is_an_item_error_without_retries(server):
    (err,) = fetch([server.url("/missing")], options=FAST)
    assert err == ItemError(
        "fetch", server.url("/missing"), "SourceError", f"could not fetch {server.url('/missing')}: HTTP 404 Not Found"
    )
    assert server.hits["/missing"] == 1


def test_connection_refused_is_an_item_error_after_retries():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed on leaving the block: nothing listens there now
    url = f"http://127.0.0.1:{port}/"
    (err,) = fetch([url], options=FAST)
    assert isinstance(err, ItemError) and err.source == url
    assert err.message == f"could not reach {url}: connection refused after 3 tries"


def test_503_then_200_succeeds_on_retry(server):
    answers = iter([(503, {"Content-Length": "0", "Retry-After": "0"}, b""), page("fine")])
    server.routes["/flaky"] = lambda handler: next(answers)
    (src,) = fetch([server.url("/flaky")], options=FAST)
    assert isinstance(src, Source) and src.content == b"fine"
    assert server.hits["/flaky"] == 2


def test_persistent_5xx_gives_up_after_the_retries(server):
    server.routes["/down"] = (500, {"Content-Length": "0"}, b"")
    (err,) = fetch([server.url("/down")], options=FAST)
    assert err.message == f"could not fetch {server.url('/down')}: HTTP 500 Internal Server Error after 3 tries"
    assert server.hits["/down"] == 3


def test_timeout_is_retried_then_reported(server):
    def slow(handler):
        time.sleep(0.5)
        return page("late")

    server.routes["/slow"] = slow
    opts = FetchOptions(timeout=0.1, retries=1, backoff_base=0.001, allow_private=True)
    (err,) = fetch([server.url("/slow")], options=opts)
    assert err.message == f"could not reach {server.url('/slow')}: timed out after 0.1 s after 2 tries"


def test_oversize_bodies_are_item_errors(server):
    server.routes["/big"] = page("x" * 5000)
    server.routes["/stream"] = (200, {"Content-Type": "text/plain"}, b"y" * 200_000)  # no Content-Length
    opts = FetchOptions(max_bytes=1000, retries=0, allow_private=True)
    big, stream = fetch([server.url("/big"), server.url("/stream")], options=opts)
    assert big.message.startswith(f"{server.url('/big')} is 4.88 KB, larger than the 1000 bytes limit (max_bytes); ")
    assert stream.message.startswith(
        f"{server.url('/stream')} is larger than the 1000 bytes limit (max_bytes); stopped reading; "
    )


def test_a_body_cut_short_of_its_content_length_is_retried_not_stored(server):
    """A connection closed before the Content-Length was sent is a broken transfer: storing the
    part that came would replace the document with its first bytes (http.client's ``read(n)``
    returns what arrived and says nothing)."""
    whole = b"<p>" + b"all of the page " * 50 + b"</p>"
    answers = iter([(200, {"Content-Type": "text/html", "Content-Length": str(len(whole))}, whole[:40])])
    server.routes["/cut"] = lambda handler: next(answers, page(whole))
    (src,) = fetch([server.url("/cut")], options=FAST)
    assert isinstance(src, Source) and src.content == whole
    assert server.hits["/cut"] == 2
    server.routes["/always-cut"] = (200, {"Content-Type": "text/html", "Content-Length": "5000"}, b"<p>part</p>")
    (err,) = fetch([server.url("/always-cut")], options=FAST)
    assert isinstance(err, ItemError)
    assert err.message == (
        f"could not fetch {server.url('/always-cut')}: the connection closed before the body ended (11 of 5000 bytes)"
        f" after 3 tries; {RETRY_HINT}"
    )


def test_a_compressed_body_is_decoded_within_the_size_limit(server):
    """A request without Accept-Encoding lets the server pick any coding (RFC 9110 12.5.3): a gzip
    page was stored as its compressed bytes, "binary file (no text extractor for application/gzip)".
    The decoded body keeps to max_bytes, so a small bomb stops at the limit."""
    import gzip
    import zlib

    html = b"<html><body><p>" + b"zipped words " * 200 + b"</p></body></html>"
    for path, coding, body in [
        ("/gz", "gzip", gzip.compress(html)),
        ("/xgz", "x-gzip", gzip.compress(html)),
        ("/deflate", "deflate", zlib.compress(html)),
    ]:
        server.routes[path] = page(body, **{"Content-Encoding": coding})
    server.routes["/bomb"] = page(gzip.compress(b"a" * 200_000), **{"Content-Encoding": "gzip"})
    server.routes["/br"] = page(b"\x0b\x02\x80hello\x03", **{"Content-Encoding": "br"})
    opts = FetchOptions(max_bytes=100_000, retries=0, allow_private=True)
    gz, xgz, deflate, bomb, br = fetch(
        [server.url(p) for p in ("/gz", "/xgz", "/deflate", "/bomb", "/br")], options=opts
    )
    assert gz.content == xgz.content == deflate.content == html, (gz, xgz, deflate)
    assert isinstance(bomb, ItemError) and bomb.message.startswith(
        f"{server.url('/bomb')} is larger than the 97.7 KB limit (max_bytes) once decompressed; "
    )
    assert isinstance(br, ItemError) and br.message == (
        f"could not fetch {server.url('/br')}: the body is compressed as 'br', which kbctl does not read"
    )
    assert server.headers["/gz"][0]["Accept-Encoding"] == "gzip, deflate"


_RSS = (
    b'<?xml version="1.0"?><rss version="2.0"><channel><title>Zipped</title>'
    b"<item><guid>z1</guid><title>One</title><description>The quaffle switch.</description></item>"
    b"</channel></rss>"
)


def test_a_gzipped_body_without_content_encoding_is_decompressed(server):
    """A .gz file, or a feed gzipped by a misconfigured server, comes without Content-Encoding
    (``application/gzip``, ``application/x-gzip``, octet-stream, or its own type): it was kept as
    its compressed bytes and refused by extract as "binary file (… application/gzip)". Its magic
    bytes say gzip: it is decompressed and its inner type found as usual (the URL without its
    ``.gz``, then the bytes)."""
    import gzip

    from kbctl.extract import detect_format

    html = b"<html><head><title>Packed</title></head><body><p>" + b"packed words " * 50 + b"</p></body></html>"
    server.routes["/feed.xml.gz"] = page(gzip.compress(_RSS), "application/gzip")
    server.routes["/download"] = page(gzip.compress(html), "application/x-gzip")
    server.routes["/notes.txt.gz"] = page(gzip.compress(b"plain notes\n"), "application/octet-stream")
    server.routes["/sitemap.rss"] = page(gzip.compress(_RSS), "application/rss+xml")  # its own type, gzipped
    server.routes["/twice"] = page(gzip.compress(gzip.compress(html)), "text/html", **{"Content-Encoding": "gzip"})
    server.routes["/members.gz"] = page(
        gzip.compress(b"first half, ") + gzip.compress(b"second half"), "application/gzip"
    )
    feed, download, notes, rss, twice, members = fetch(
        [
            server.url(p)
            for p in ("/feed.xml.gz", "/download", "/notes.txt.gz", "/sitemap.rss", "/twice", "/members.gz")
        ],
        options=FAST,
    )
    assert isinstance(feed, Source) and feed.kind == "feed" and feed.content == _RSS, feed
    assert feed.media_type == "application/xml" and detect_format(feed) == "feed"
    assert download.content == html and download.kind == "url" and detect_format(download) == "html"
    assert notes.content == b"plain notes\n" and notes.media_type == "text/plain" and detect_format(notes) == "text"
    assert rss.kind == "feed" and rss.content == _RSS and rss.media_type == "application/rss+xml"
    assert twice.content == html and twice.media_type == "text/html"
    assert members.content == b"first half, second half"
    assert feed.metadata["content_type"] == "application/gzip"  # what the server said stays on record


def test_a_gzipped_body_without_content_encoding_keeps_to_the_size_limit(server):
    """The decompressed size keeps to max_bytes (a bomb stops at the limit, never held whole); a
    gzip body that does not decompress is refused in one line, not stored as its bytes."""
    import gzip

    server.routes["/bomb.gz"] = page(gzip.compress(b"a" * 5_000_000), "application/gzip")
    server.routes["/members.gz"] = page(gzip.compress(b"b" * 60_000) * 2, "application/gzip")
    server.routes["/cut.gz"] = page(gzip.compress(b"some text " * 100)[:30], "application/gzip")
    opts = FetchOptions(max_bytes=100_000, retries=0, allow_private=True)
    bomb, members, cut = fetch([server.url(p) for p in ("/bomb.gz", "/members.gz", "/cut.gz")], options=opts)
    for err, path in ((bomb, "/bomb.gz"), (members, "/members.gz")):
        assert isinstance(err, ItemError), err
        assert err.message.startswith(
            f"{server.url(path)} is larger than the 97.7 KB limit (max_bytes) once decompressed; "
        )
    assert isinstance(cut, ItemError) and cut.message == (
        f"could not fetch {server.url('/cut.gz')}: corrupt gzip body (cut short)"
    )


def test_an_oversize_body_names_the_setting_that_raises_the_limit_in_its_hint(server, tmp_path):
    """The error said "(max_bytes)" and no more: the hint says where to raise it, and the ledger's
    line carries it after a ';' as every fetch error's does."""
    server.routes["/big"] = page("x" * 5000)
    server.routes["/stream"] = (200, {"Content-Type": "text/plain"}, b"y" * 200_000)
    opts = FetchOptions(max_bytes=1000, retries=0, allow_private=True)
    for path in ("/big", "/stream"):
        with pytest.raises(SourceError) as e:
            get(server.url(path), opts)
        assert e.value.hint == "raise max_bytes (in bytes) in the [fetch] table of kbctl.toml"
        (err,) = fetch([server.url(path)], options=opts)
        assert err.message == f"{e.value.message}; {e.value.hint}"
    make_tree(tmp_path, {"big.md": "x" * 2048})
    small = FetchOptions(max_file_bytes=1024)
    file_hint = "raise max_file_bytes (in bytes) in the [fetch] table of kbctl.toml"
    (walked,) = fetch([str(tmp_path)], options=small)
    (named,) = fetch([str(tmp_path / "big.md")], options=small)
    (piped,) = fetch(["-"], stdin=io.BytesIO(b"x" * 2048), options=small)
    for err in (walked, named, piped):
        assert isinstance(err, ItemError) and err.message.endswith(f"(max_file_bytes); {file_hint}"), err


def test_a_chunked_body_cut_short_says_the_connection_closed_before_it_ended(server):
    """A chunked body whose connection closes mid-body said "could not reach URL: connection broken
    (IncompleteRead)": the server was reached and answered. It says what happened, and (by "after N
    tries") that it was retried; never stored short."""
    chunked = {"Content-Type": "text/html", "Transfer-Encoding": "chunked"}
    server.routes["/cut"] = (200, chunked, b"10\r\n<p>0123456789abc\r\n100\r\nonly part of the ")
    (err,) = fetch([server.url("/cut")], options=FAST)
    assert isinstance(err, ItemError)
    assert err.message == (
        f"could not fetch {server.url('/cut')}: the connection closed before the body ended after 3 tries; {RETRY_HINT}"
    )
    assert server.hits["/cut"] == 3
    whole = b"<p>all of it</p>"
    answers = iter([(200, chunked, b"10\r\n<p>0123456789abc\r\n")])
    server.routes["/once"] = lambda handler: next(answers, page(whole))
    (src,) = fetch([server.url("/once")], options=FAST)
    assert isinstance(src, Source) and src.content == whole and server.hits["/once"] == 2


def _part_then(then: str, part: bytes, length: int | None = 5000, stall: float = 1.0):
    """A route that sends its headers and ``part`` of a body (``length`` its Content-Length, chunked
    when ``None``), then stalls for ``stall`` s (``then="stall"``) or resets the connection."""

    def route(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        if length is None:
            handler.send_header("Transfer-Encoding", "chunked")
            body = f"{len(part) + 100:x}\r\n".encode() + part
        else:
            handler.send_header("Content-Length", str(length))
            body = part
        handler.end_headers()
        handler.wfile.write(body)
        if then == "stall":
            time.sleep(stall)
        else:
            time.sleep(0.2)  # the part is read before the reset
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        handler.connection.close()  # with SO_LINGER 0: a reset (RST), not an orderly close
        raise ConnectionAbortedError("answered by the route")

    return route


RETRY_HINT = "run the ingest again later: `kbctl ingest -n NS --retry-failed` fetches what failed"


def test_a_body_that_stalls_midway_says_the_read_timed_out_after_what_came(server):
    """A server that sent its headers and part of the body, then nothing, was reported as "could
    not reach URL: timed out after N s", the words for a host that never answered. It says how
    much of the body came, is retried as before, and hints at the timeout and --retry-failed."""
    part = b"<p>" + b"x" * 37
    server.routes["/stall"] = _part_then("stall", part)
    opts = FetchOptions.from_config(
        {"timeout": 0.3, "retries": 1, "allow_hosts": ["127.0.0.1"]}, backoff_base=0.001, backoff_jitter=0.0
    )
    (err,) = fetch([server.url("/stall")], options=opts)
    assert isinstance(err, ItemError), err
    assert err.message == (
        f"could not fetch {server.url('/stall')}: the read timed out after 40 of 5000 bytes"
        " (nothing came for 0.3 s) after 2 tries;"
        f" raise timeout (in seconds) in the [fetch] table of kbctl.toml for a slow server, or {RETRY_HINT}"
    )
    assert server.hits["/stall"] == 2
    whole = b"<p>all of it</p>"
    answers = iter([_part_then("stall", part)])
    server.routes["/once"] = lambda handler: next(answers, lambda h: page(whole))(handler)
    (src,) = fetch([server.url("/once")], options=opts)
    assert isinstance(src, Source) and src.content == whole and server.hits["/once"] == 2


def test_a_body_whose_connection_is_reset_midway_says_the_connection_was_lost(server):
    """A connection reset in the middle of the body was reported as "could not reach URL:
    Connection reset by peer", though the server had answered. It says so, with how much of the
    body came (of its Content-Length, or of a chunked body), is retried, and hints at --retry-failed."""
    part = b"<p>" + b"y" * 37
    server.routes["/reset"] = _part_then("reset", part)
    server.routes["/chunked"] = _part_then("reset", part, length=None)
    reset, chunked = fetch([server.url("/reset"), server.url("/chunked")], options=FAST)
    assert isinstance(reset, ItemError) and reset.message == (
        f"could not fetch {server.url('/reset')}: the connection was lost after 40 of 5000 bytes"
        f" (connection reset by peer) after 3 tries; {RETRY_HINT}"
    )
    assert isinstance(chunked, ItemError) and chunked.message == (
        f"could not fetch {server.url('/chunked')}: the connection was lost after 40 bytes"
        f" (connection reset by peer) after 3 tries; {RETRY_HINT}"
    )
    assert server.hits["/reset"] == server.hits["/chunked"] == 3
    with pytest.raises(SourceError) as e:
        get(server.url("/reset"), FAST)
    assert e.value.hint == RETRY_HINT


def test_backoff_is_exponential_and_honours_retry_after_up_to_the_cap():
    opts = FetchOptions(backoff_base=0.5, backoff_factor=2, backoff_jitter=0.0, retry_after_cap=30)
    assert [backoff_delay(n, opts) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert backoff_delay(1, opts, retry_after=7) == 7
    assert backoff_delay(1, opts, retry_after=600) == 30
    jittery = FetchOptions(backoff_base=1.0, backoff_jitter=0.5)
    assert all(1.0 <= backoff_delay(1, jittery) <= 1.5 for _ in range(50))
    assert _retry_after({"Retry-After": "12"}) == 12
    assert (
        0
        < _retry_after({"Retry-After": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 60))})
        <= 61
    )


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_longer_than_kbctl_waits_is_not_slept_through_for_nothing(server, status):
    """A server down for maintenance says when to come back (Retry-After: 3600). kbctl slept the
    cap (60 s) before each of its retries, against the server's word, and failed anyway: three
    minutes per URL of a cron job's batch. It fails at once, saying when the server asked to be
    asked again and how."""
    server.routes["/down"] = (status, {"Content-Length": "0", "Retry-After": "3600"}, b"")
    slept: list[float] = []
    opts = FetchOptions(retries=3, retry_after_cap=60, allow_private=True)
    with pytest.raises(SourceError) as e:
        get(server.url("/down"), opts, sleep=slept.append)
    assert slept == [] and server.hits["/down"] == 1
    assert e.value.message.startswith(f"could not fetch {server.url('/down')}: HTTP {status} ")
    assert e.value.message.endswith(
        "; the server asks to be asked again in 3600 s (Retry-After), past the 60 s kbctl waits"
    )
    assert e.value.hint and "--retry-failed" in e.value.hint
    (err,) = fetch([server.url("/down")], options=opts)  # the ledger's line carries the hint
    assert err.message == f"{e.value.message}; {e.value.hint}"
    # within the cap: waited as asked, then tried again
    answers = iter([(status, {"Content-Length": "0", "Retry-After": "7"}, b""), page("back")])
    server.routes["/soon"] = lambda handler: next(answers)
    assert get(server.url("/soon"), opts, sleep=slept.append).body == b"back" and slept == [7]


# -- feeds ---------------------------------------------------------------------------------------


def feed_route(server: Server, etag: str = '"v1"'):
    body = (FIXTURES / "feed.xml").read_bytes()

    def route(handler):
        if handler.headers.get("If-None-Match") == etag:
            return 304, {"ETag": etag}, b""
        return page(body, "application/rss+xml; charset=utf-8", ETag=etag)

    server.routes["/feed.xml"] = route


def test_feed_with_etag_then_304_costs_one_request(server):
    feed_route(server)
    state = MemoryFeedState()
    url = server.url("/feed.xml")
    (src,) = fetch([url], options=FAST, state=state)
    assert src.kind == "feed" and src.uri == url and src.media_type == "application/rss+xml"
    assert src.content == (FIXTURES / "feed.xml").read_bytes()
    assert (src.metadata["etag"], src.metadata["entries"], src.metadata["feed_title"]) == (
        '"v1"',
        2,
        "Lumen release notes",
    )
    assert state.get(url) == ('"v1"', None)
    assert server.hits["/feed.xml"] == 1

    assert list(fetch([url], options=FAST, state=state, follow_links=True)) == []
    assert server.hits["/feed.xml"] == 2  # exactly one request for the second run
    assert server.headers["/feed.xml"][1]["If-None-Match"] == '"v1"'
    assert server.hits["/post/2.html"] == 0


def test_feed_is_fetched_in_full_when_its_etag_changed(server):
    feed_route(server, etag='"v2"')
    state = MemoryFeedState()
    state.set(server.url("/feed.xml"), '"v1"', "Wed, 01 May 2024 12:00:00 GMT")
    (src,) = fetch([server.url("/feed.xml")], options=FAST, state=state)
    assert src.kind == "feed" and state.get(server.url("/feed.xml")) == ('"v2"', None)
    sent = server.headers["/feed.xml"][0]
    assert (sent["If-None-Match"], sent["If-Modified-Since"]) == ('"v1"', "Wed, 01 May 2024 12:00:00 GMT")


def test_follow_links_fetches_pages_of_summary_only_entries(server):
    feed_route(server)
    server.routes["/post/2.html"] = page("<p>Full notes of 2.5</p>")
    got = list(fetch([server.url("/feed.xml")], options=FAST, follow_links=True))
    assert [s.kind for s in got] == ["feed", "url"]
    linked = got[1]
    assert linked.uri == server.url("/post/2.html") and linked.content == b"<p>Full notes of 2.5</p>"
    assert (linked.metadata["feed_url"], linked.metadata["entry_id"]) == (server.url("/feed.xml"), "lumen-2.5")
    assert server.hits["/post/1.html"] == 0  # that entry carries its full content


def test_follow_links_reports_a_dead_link_and_goes_on(server):
    feed_route(server)
    got = list(fetch([server.url("/feed.xml")], options=FAST, follow_links=True))
    assert isinstance(got[0], Source) and isinstance(got[1], ItemError)
    assert got[1].source == server.url("/post/2.html") and "HTTP 404" in got[1].message


def test_follow_links_leaves_an_entry_whose_only_link_is_its_urn_id(server):
    """An entry without a <link> gets its id as ``link`` from feedparser (``guidislink``): an Atom
    ``urn:uuid:…`` id, an RSS ``tag:`` GUID. --follow-links recorded "refused urn:… : only http and
    https links are followed" for each such entry, though the feed gave no link and the entry was
    stored: a run of such a feed was "partial", and failed under --strict. A link the feed does give
    (``file:``) is still refused and recorded (test_fetch_policy)."""
    atom = (
        '<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>'
        "<entry><id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id><title>U</title><summary>s</summary></entry>"
        "<entry><id>tag:example.org,2024:2</id><title>T</title><summary>s</summary></entry>"
        f"<entry><id>{server.url('/post/3.html')}</id><title>H</title><summary>s</summary></entry>"
        "</feed>"
    )
    server.routes["/atom.xml"] = page(atom, "application/atom+xml")
    server.routes["/post/3.html"] = page("<p>three</p>")
    got = list(fetch([server.url("/atom.xml")], options=FAST, follow_links=True))
    assert [type(x).__name__ for x in got] == ["Source", "Source"], got
    assert got[1].uri == server.url("/post/3.html")  # an http(s) id is the entry's permalink: followed


def test_follow_links_leaves_an_entry_whose_only_link_is_a_guid_that_is_no_url(server):
    """RSS GUIDs are permalinks unless isPermaLink="false" says otherwise, and many feeds leave that
    out of GUIDs that are no URL (``<guid>12345</guid>``). feedparser resolved such a GUID against
    the feed's URL (``http://host/12345``) and --follow-links fetched that: a 404 recorded for
    each entry on every poll, the run "partial" (and failing under --strict) for good. A permalink
    is a URL as written; a relative <link> the feed gives is still followed, resolved."""
    rss = (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>R</title>'
        "<item><guid>12345</guid><title>N</title><description>s</description></item>"
        "<item><guid>posts/7</guid><title>P</title><description>s</description></item>"
        "<item><guid>g8</guid><link>pages/8.html</link><title>L</title><description>s</description></item>"
        "</channel></rss>"
    )
    server.routes["/feeds/news.rss"] = page(rss, "application/rss+xml")
    server.routes["/feeds/pages/8.html"] = page("<p>eight</p>")
    got = list(fetch([server.url("/feeds/news.rss")], options=FAST, follow_links=True))
    assert [type(x).__name__ for x in got] == ["Source", "Source"], got
    assert got[1].uri == server.url("/feeds/pages/8.html")
    assert server.hits["/feeds/12345"] == server.hits["/feeds/posts/7"] == 0


def test_xml_that_is_not_a_feed_is_a_plain_url(server):
    server.routes["/data.xml"] = page("<?xml version='1.0'?><root><a>1</a></root>", "application/xml")
    (src,) = fetch([server.url("/data.xml")], options=FAST, state=MemoryFeedState())
    assert src.kind == "url" and src.media_type == "application/xml"


def test_an_unexpected_failure_ends_only_its_target(server, tmp_path, monkeypatch):
    from kbctl.sources import feed

    def broken(*args):
        raise RuntimeError("parser exploded")

    monkeypatch.setattr(feed, "parse_feed", broken)
    feed_route(server)
    make_tree(tmp_path, {"a.md": "a"})
    err, src = fetch([server.url("/feed.xml"), str(tmp_path)], options=FAST)
    assert (err.source, err.error_class, err.message) == (server.url("/feed.xml"), "RuntimeError", "parser exploded")
    assert src.content == b"a"


def test_file_feed_state_round_trips_and_survives_a_corrupt_file(tmp_path):
    path = tmp_path / "state" / "feeds.json"
    FileFeedState(path).set("http://h/feed", '"e"', "Wed, 01 May 2024 12:00:00 GMT")
    assert FileFeedState(path).get("http://h/feed") == ('"e"', "Wed, 01 May 2024 12:00:00 GMT")
    assert json.loads(path.read_text())["http://h/feed"]["etag"] == '"e"'
    assert FileFeedState(path).get("http://h/other") is None
    path.write_text("{not json")
    broken = FileFeedState(path)
    assert broken.get("http://h/feed") is None
    broken.set("http://h/feed", None, "x")
    assert FileFeedState(path).get("http://h/feed") == (None, "x")


# -- bzip2, xz and zstd: read as gzip is, or refused naming the type ---------------------------------


def _bz2(data: bytes) -> bytes:
    import bz2

    return bz2.compress(data)


def _xz(data: bytes) -> bytes:
    import lzma

    return lzma.compress(data)


#: suffix, compress, the word in messages, the command that tests such a file, tar's flag for a stream
_PACKERS = {".bz2": (_bz2, "bz2", "bzip2 -t", "-xj"), ".xz": (_xz, "xz", "xz -t", "-xJ")}


@pytest.mark.parametrize("suffix", sorted(_PACKERS))
def test_a_bzip2_or_xz_file_is_read_as_the_format_its_name_says_without_its_suffix(tmp_path, suffix):
    """``notes.md.bz2`` and ``notes.md.xz`` were not taken by a folder walk and, named directly, were
    refused by extract as "binary file (no text extractor for application/x-bzip2)" (``x-xz``): read
    as gzip is, by their magic bytes, their type the name's without the suffix."""
    from kbctl.extract import detect_format, extract

    pack = _PACKERS[suffix][0]
    pdf = (Path(__file__).resolve().parent.parent / "fixtures" / "extract" / "report.pdf").read_bytes()
    inner = {
        f"notes.md{suffix}": b"# Notes\n\nThe quaffle switch.\n",
        f"draft.md{suffix}": b"Words without a heading.\n",
        f"sub/report.pdf{suffix}": pdf,
        f"server.log{suffix}": b"not a format kbctl reads\n",  # its inner suffix is none kbctl reads: not taken
        f"backup.tar{suffix}": b"x",  # nor an archive
    }
    for rel, data in inner.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(pack(data))
    got = {s.metadata["path"]: s for s in fetch([str(tmp_path)])}
    assert sorted(got) == [f"draft.md{suffix}", f"notes.md{suffix}", f"sub/report.pdf{suffix}"], got
    assert list_uris([str(tmp_path)]) == {s.uri for s in got.values()}
    for rel, fmt, media_type in [
        (f"notes.md{suffix}", "markdown", "text/markdown"),
        (f"sub/report.pdf{suffix}", "pdf", "application/pdf"),
    ]:
        src = got[rel]
        assert isinstance(src, Source) and src.content == inner[rel] and src.uri == f"file://{tmp_path}/{rel}", rel
        assert src.media_type == media_type and detect_format(src) == fmt, rel
        assert src.metadata["size"] == (tmp_path / rel).stat().st_size
    (notes,) = extract(got[f"notes.md{suffix}"])
    assert notes.title == "Notes" and "quaffle switch" in notes.text
    (draft,) = extract(got[f"draft.md{suffix}"])
    assert draft.title == "draft"  # the fallback title drops the suffix, as for .gz
    (named,) = fetch([str(tmp_path / f"notes.md{suffix}")])
    assert isinstance(named, Source) and named.content == inner[f"notes.md{suffix}"]
    (tmp_path / "unnamed.md").write_bytes(pack(b"# Unnamed\n"))  # by its magic bytes under any name
    (unnamed,) = fetch([str(tmp_path / "unnamed.md")])
    assert isinstance(unnamed, Source) and unnamed.content == b"# Unnamed\n" and unnamed.media_type == "text/markdown"


@pytest.mark.parametrize("suffix", sorted(_PACKERS))
def test_a_bzip2_or_xz_file_keeps_to_the_size_limit_and_a_corrupt_one_is_recorded(tmp_path, suffix):
    """A bomb stops at max_file_bytes with gzip's message (in one stream or in two); a file cut short
    or corrupt is one line naming its format with the command that tests it; the batch goes on."""
    pack, word, test, _ = _PACKERS[suffix]
    whole = pack(b"some text, " * 2000)
    files = {
        f"a-bomb.md{suffix}": pack(b"a" * 5_000_000),
        f"b-streams.txt{suffix}": pack(b"b" * 60_000) * 2,
        f"c-cut.md{suffix}": whole[: len(whole) // 2],
        f"d-garbage.md{suffix}": whole[:40] + b"\xa5" * 200,
        f"e-good.md{suffix}": pack(b"# Good\n") * 2,  # two streams, one after another
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    bomb, streams, cut, garbage, good = fetch([str(tmp_path)], options=FetchOptions(max_file_bytes=100_000))
    hint = "raise max_file_bytes (in bytes) in the [fetch] table of kbctl.toml"
    for err, name in ((bomb, f"a-bomb.md{suffix}"), (streams, f"b-streams.txt{suffix}")):
        assert isinstance(err, ItemError) and err.source == f"file://{tmp_path}/{name}", err
        assert err.message == (
            f"{tmp_path}/{name} is larger than the 97.7 KB limit (max_file_bytes) once decompressed; {hint}"
        )
    test_hint = f"test it with `{test} FILE`: a file cut short by a copy or a download is read once it is whole"
    assert isinstance(cut, ItemError) and cut.message == (
        f"cannot read {tmp_path}/c-cut.md{suffix}: corrupt {word} file (cut short); {test_hint}"
    ), cut
    assert isinstance(garbage, ItemError) and re.fullmatch(
        re.escape(f"cannot read {tmp_path}/d-garbage.md{suffix}: corrupt {word} file (")
        + r"(?!cut short)[^)]+\); "
        + re.escape(test_hint),
        garbage.message,
    ), garbage
    assert isinstance(good, Source) and good.content == b"# Good\n# Good\n", good


@pytest.mark.parametrize("suffix", sorted(_PACKERS))
def test_a_tar_in_bzip2_or_xz_is_refused_as_an_archive(tmp_path, suffix):
    """As a gzipped tar is: named as a tar (``.tbz2``, ``.tar.bz2``, ``.txz``, ``.tar.xz``) or not
    (``ustar`` at offset 257 of what it holds)."""
    import tarfile

    member = tmp_path / "inside.md"
    member.write_text("# Inside\n")
    tar = tmp_path / "bundle.tar"
    with tarfile.open(tar, "w") as t:
        t.add(member, "inside.md")
    packed = _PACKERS[suffix][0](tar.read_bytes())
    names = {".bz2": ("bundle.tbz2", "bundle.tbz", "bundle.tar.bz2"), ".xz": ("bundle.txz", "bundle.tar.xz")}[suffix]
    for name in (*names, f"bundle.md{suffix}"):
        (tmp_path / name).write_bytes(packed)
        (err,) = fetch([str(tmp_path / name)])
        assert isinstance(err, ItemError), (name, err)
        assert err.message == (
            f"cannot read {tmp_path}/{name}: a tar archive, which kbctl does not read;"
            f" unpack it (tar -xf {tmp_path}/{name} -C DIR) and ingest the folder"
        ), err.message


@pytest.mark.parametrize("suffix", sorted(_PACKERS))
def test_bzip2_or_xz_data_on_stdin_is_read_as_such_a_file_is(tmp_path, suffix):
    """``bzip2 -c notes.md | kbctl ingest -`` (``xz -c``) kept the compressed bytes, as gzip did
    before session 47: sniffed, within the limit, the type from ``--stdin-name`` without its suffix."""
    import tarfile

    pack, word, _, flag = _PACKERS[suffix]
    text = b"# Notes\n\npiped in, packed"
    packed = pack(text)
    (src,) = fetch(["-"], stdin=io.BytesIO(packed))
    digest = hashlib.sha256(text).hexdigest()
    assert isinstance(src, Source) and src.content == text and src.uri == f"stdin:{digest[:16]}", src
    assert src.metadata["sha256"] == digest and src.metadata["size"] == len(packed), src.metadata
    (named,) = fetch(["-"], stdin=io.BytesIO(packed), options=FetchOptions(stdin_name=f"notes.md{suffix}"))
    assert (named.content, named.media_type, named.uri) == (text, "text/markdown", f"stdin:notes.md{suffix}")
    (bomb,) = fetch(["-"], stdin=io.BytesIO(pack(b"a" * 5000)), options=FetchOptions(max_file_bytes=1000))
    assert isinstance(bomb, ItemError) and "stdin is larger than" in bomb.message, bomb
    assert "once decompressed" in bomb.message, bomb.message
    (cut,) = fetch(["-"], stdin=io.BytesIO(packed[:-8]))
    assert isinstance(cut, ItemError) and f"cannot read stdin: corrupt {word} file (cut short)" in cut.message, cut
    with tarfile.open(tmp_path / "a.tar", "w") as tar:
        (tmp_path / "a.md").write_text("# A\n")
        tar.add(tmp_path / "a.md", arcname="a.md")
    (archive,) = fetch(["-"], stdin=io.BytesIO(pack((tmp_path / "a.tar").read_bytes())))
    assert isinstance(archive, ItemError) and "cannot read stdin: a tar archive" in archive.message, archive
    assert f"tar {flag} -C DIR" in archive.message, archive.message  # its hint, for a stream of this format


def _tar_of(text: bytes) -> bytes:
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        member = tarfile.TarInfo("inside.md")
        member.size = len(text)
        tar.addfile(member, io.BytesIO(text))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("path", "pack", "content_type"),
    [
        ("/bundle.tar.gz", "gzip", "application/gzip"),
        ("/bundle.tgz", "gzip", "application/x-gtar"),
        ("/bundle.tar.bz2", "bz2", "application/x-bzip2"),
        ("/bundle.tar.xz", "xz", "application/x-xz"),
        ("/bundle.tar", None, "application/x-tar"),
        ("/download", None, "application/octet-stream"),
        ("/notes.md.gz", "gzip", "application/gzip"),  # named as a file, holding a tar
        ("/encoded.tar", "encoding", "application/x-tar"),  # Content-Encoding: gzip
    ],
)
def test_a_tar_archive_by_url_is_refused_as_an_archive_with_a_hint_to_unpack_it(server, path, pack, content_type):
    """A tar by URL (gzipped, bzip2, xz or plain) was fetched and refused by extract as "binary file
    (no text extractor for application/x-tar)", hint "… exclude other files" (a .md.gz holding one:
    "no text extractor for text/markdown"): nothing said it is an archive nor what to do. It is
    refused where it is fetched, as a file is: an archive kbctl does not read, unpack and ingest."""
    import bz2
    import gzip
    import lzma

    tar = _tar_of(b"# Inside\n\nsome words\n")
    body = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}.get(pack or "", lambda b: b)(tar)
    headers = {}
    if pack == "encoding":
        body, headers = gzip.compress(tar), {"Content-Encoding": "gzip"}
    server.routes[path] = page(body, content_type, **headers)
    (err,) = fetch([server.url(path)], options=FAST)
    assert isinstance(err, ItemError) and err.stage == "fetch", err
    assert err.message == (
        f"could not fetch {server.url(path)}: a tar archive, which kbctl does not read;"
        " download it, unpack it (tar -xf FILE -C DIR) and ingest the folder"
    ), err.message


def test_a_page_with_ustar_where_a_tar_has_it_is_still_a_page(server):
    """A tar is told by its header (``ustar`` at 257 and the header's checksum), not by the word:
    a page that has it at that offset is read as a page."""
    head = b"<html><body><p>" + b"x" * (148 - 15) + b"0001234 "  # octal digits where a tar's checksum is
    text = head + b"x" * (257 - len(head)) + b"ustar archives " + b"y" * 300 + b"</p></body></html>"
    assert text[257:262] == b"ustar" and len(text) >= 512
    server.routes["/about-tar.html"] = page(text)
    (src,) = fetch([server.url("/about-tar.html")], options=FAST)
    assert isinstance(src, Source) and src.content == text, src


def test_zstd_data_is_refused_naming_its_type_with_a_hint_to_decompress_it(tmp_path, server):
    """zstd needs a package kbctl does not depend on: a file, stdin or a body of zstd data was kept
    as its bytes and refused by extract as "binary file (… application/zstd)", which says nothing
    of what to do. It is refused where it is read, naming the type, the hint ``zstd -d``."""
    frame = b"\x28\xb5\x2f\xfd" + bytes(range(40))  # a zstd frame's magic, then what follows
    (tmp_path / "notes.md.zst").write_bytes(frame)
    (on_disk,) = fetch([str(tmp_path / "notes.md.zst")])
    assert isinstance(on_disk, ItemError), on_disk
    assert on_disk.message == (
        f"cannot read {tmp_path}/notes.md.zst: zstd data, which kbctl does not read;"
        f" decompress it (zstd -d {tmp_path}/notes.md.zst) and ingest the file it holds"
    ), on_disk.message
    assert list(fetch([str(tmp_path)])) == []  # a walk takes no .zst (no suffix kbctl reads)
    (piped,) = fetch(["-"], stdin=io.BytesIO(frame))
    assert isinstance(piped, ItemError) and piped.message.startswith("cannot read stdin: zstd data, "), piped
    assert "zstd -dc FILE | kbctl ingest -" in piped.message, piped.message
    server.routes["/notes.md.zst"] = page(frame, "application/zstd")
    (body,) = fetch([server.url("/notes.md.zst")], options=FAST)
    assert isinstance(body, ItemError) and body.message.startswith(
        f"could not fetch {server.url('/notes.md.zst')}: zstd data, which kbctl does not read; "
    ), body
    assert "zstd -d" in body.message, body.message


def test_a_bzip2_or_xz_body_is_decompressed_within_the_size_limit(server):
    """A ``.bz2`` or ``.xz`` URL (``application/x-bzip2``, ``application/x-xz``, octet-stream or its
    own type) was kept as its compressed bytes: read as a gzip body is, by its magic bytes, the type
    from the URL without the suffix; a bomb stops at max_bytes, a body cut short is one line."""
    from kbctl.extract import detect_format

    html = b"<html><head><title>Packed</title></head><body><p>" + b"packed words " * 50 + b"</p></body></html>"
    server.routes["/feed.xml.bz2"] = page(_bz2(_RSS), "application/x-bzip2")
    server.routes["/notes.txt.xz"] = page(_xz(b"plain notes\n"), "application/x-xz")
    server.routes["/download"] = page(_xz(html), "application/octet-stream")
    server.routes["/page"] = page(_bz2(html), "text/html")  # its own type, packed
    feed, notes, download, html_page = fetch(
        [server.url(p) for p in ("/feed.xml.bz2", "/notes.txt.xz", "/download", "/page")], options=FAST
    )
    assert isinstance(feed, Source) and feed.kind == "feed" and feed.content == _RSS, feed
    assert feed.media_type == "application/xml" and feed.metadata["content_type"] == "application/x-bzip2"
    assert isinstance(notes, Source) and notes.content == b"plain notes\n" and notes.media_type == "text/plain"
    assert isinstance(download, Source) and download.content == html and detect_format(download) == "html"
    assert isinstance(html_page, Source) and html_page.content == html and html_page.media_type == "text/html"

    server.routes["/bomb.xz"] = page(_xz(b"a" * 5_000_000), "application/x-xz")
    server.routes["/bomb.bz2"] = page(_bz2(b"a" * 5_000_000), "application/x-bzip2")
    cut = _bz2(b"some text, " * 2000)
    server.routes["/cut.bz2"] = page(cut[: len(cut) // 2], "application/x-bzip2")
    opts = FetchOptions(max_bytes=100_000, retries=0, allow_private=True)
    bomb_xz, bomb_bz2, short = fetch([server.url(p) for p in ("/bomb.xz", "/bomb.bz2", "/cut.bz2")], options=opts)
    for err, path in ((bomb_xz, "/bomb.xz"), (bomb_bz2, "/bomb.bz2")):
        assert isinstance(err, ItemError) and err.message.startswith(
            f"{server.url(path)} is larger than the 97.7 KB limit (max_bytes) once decompressed; "
        ), err
    assert isinstance(short, ItemError) and short.message == (
        f"could not fetch {server.url('/cut.bz2')}: corrupt bz2 body (cut short)"
    ), short
