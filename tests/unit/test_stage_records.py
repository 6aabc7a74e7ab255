"""The stages' NDJSON read from stdin: a record of the right ``type`` but the wrong shape (a field
missing, null, of another type; content that is not base64) is a UsageError naming the stdin line
and the field, before any stage works on it. Such records were Python tracebacks (exit 1)."""

from __future__ import annotations

import copy
import json

import pytest

from kbctl.errors import UsageError
from kbctl.ingest.stages import read_records

DOC = {"uri": "file:///x.md", "title": "t", "text": "hello world", "blocks": [], "source_type": "text", "metadata": {}}
CHUNK = {
    "document_uri": "file:///x.md",
    "position": 0,
    "text": "hello world",
    "token_count": 2,
    "char_start": 0,
    "char_end": 11,
}
GOOD = {
    "source": {
        "type": "source",
        "source": {"uri": "file:///x.md", "content": "aGVsbG8=", "kind": "file", "metadata": {}},
    },
    "document": {
        "type": "document",
        "source_uri": "file:///x.md",
        "source_sha": "ab",
        "source_kind": "file",
        "document": DOC,
    },
    "chunked": {
        "type": "chunked",
        "source_uri": "file:///x.md",
        "source_sha": "ab",
        "document": DOC,
        "chunks": [CHUNK],
    },
    "embedded": {
        "type": "embedded",
        "source_uri": "file:///x.md",
        "source_sha": "ab",
        "document": DOC,
        "chunks": [CHUNK],
        "embeddings": [[0.5, 0.5]],
    },
    "error": {"type": "error", "error": {"stage": "fetch", "source": "x", "error_class": "E", "message": "m"}},
}


def _set(rec: dict, path: str, value) -> dict:
    rec = copy.deepcopy(rec)
    *parents, last = path.split(".")
    node = rec
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is _DROP:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return rec


_DROP = object()

BAD = [
    ("source", "source", _DROP, "source"),
    ("source", "source", "x", "source"),
    ("source", "source.uri", 1, "source.uri"),
    ("source", "source.content", "aGVsbG8", "source.content"),
    ("source", "source.metadata", None, "source.metadata"),
    ("document", "document", _DROP, "document"),
    ("document", "source_uri", _DROP, "source_uri"),
    ("document", "document.text", None, "document.text"),
    ("document", "document.uri", 5, "document.uri"),
    ("chunked", "chunks", _DROP, "chunks"),
    ("chunked", "chunks", [{}], "chunks.0"),
    ("chunked", "chunks.0.text", None, "chunks.0.text"),
    ("embedded", "chunks.0.position", "x", "chunks.0.position"),
    ("embedded", "chunks.0.page", "x", "chunks.0.page"),
    ("embedded", "document.metadata", None, "document.metadata"),
    ("embedded", "embeddings", _DROP, "embeddings"),
    ("embedded", "embeddings", 3, "embeddings"),
    ("error", "error", {}, "error"),
]


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_the_records_stages_write_are_read(kind):
    assert list(read_records([json.dumps(GOOD[kind])])) == [GOOD[kind]]


@pytest.mark.parametrize(("kind", "path", "value", "field"), BAD, ids=[f"{k}:{p}" for k, p, _, _ in BAD])
def test_a_record_of_the_wrong_shape_names_its_line_and_field(kind, path, value, field):
    lines = [json.dumps(GOOD[kind]), json.dumps(_set(GOOD[kind], path, value))]
    with pytest.raises(UsageError) as e:
        list(read_records(lines))
    assert e.value.message.startswith(f"stdin line 2: a {kind} record's {field}"), e.value.message
    assert "\n" not in e.value.message and e.value.hint


def test_a_malformed_record_through_the_cli_is_one_line(tmp_path):
    from tests.conftest import run_kbctl

    bad = json.dumps(_set(GOOD["source"], "source.content", "aGVsbG8")).encode() + b"\n"
    r = run_kbctl(["--home", str(tmp_path / "home"), "extract"], input=bad)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(b"error: stdin line 1: a source record's source.content"), r.stderr
    assert b"Traceback" not in r.stderr
