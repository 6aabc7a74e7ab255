"""Bounded parsing of what a user's bytes say (issue 26, ingest side): front matter, feeds, mail
headers and NDJSON records are capped in size, depth and expansion, and a refusal is one recorded
line, never a traceback or a host brought down."""

from __future__ import annotations

import tracemalloc

import pytest

from kbctl.errors import ExtractError
from kbctl.extract import extract
from kbctl.extract.base import build_document
from kbctl.extract.frontmatter import split_front_matter
from kbctl.types import Block, Source
from tests.fixtures import adversarial as A


def _md(text: str, name: str = "a.md") -> Source:
    return Source(uri=f"file:///docs/{name}", content=text.encode(), media_type="text/markdown", metadata={})


def test_a_yaml_anchor_bomb_is_refused_in_bounded_memory():
    """Six levels of ``&b [*a, *a…]``: 10**6 items once expanded; took 20 s and 740 MB, stored 39 MB of JSON."""
    tracemalloc.start()
    try:
        meta, body, err = split_front_matter(A.anchor_bomb(6))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert meta == {} and err is not None and "larger than" in err, err
    assert "pewter" in body
    assert peak < 32 << 20, f"{peak / 2**20:.0f} MB"


def test_the_ten_level_anchor_file_is_stored_without_its_front_matter_and_with_a_warning():
    doc = extract(_md(A.anchor_bomb(10)))[0]
    assert "pewter" in doc.text
    assert "a9" not in doc.metadata and "larger than" in doc.metadata["front_matter_error"]
    assert [c for c, _ in doc.notes] == ["MetadataWarning"]
    assert len(repr(doc.metadata)) < 1 << 20


@pytest.mark.parametrize("toml", [False, True], ids=["yaml", "toml"])
def test_deeply_nested_front_matter_is_a_recorded_warning_not_a_traceback(toml):
    """5000 nested lists: RecursionError out of the parser (a traceback, the item failed) before."""
    meta, body, err = split_front_matter(A.deep_front_matter(5000, toml=toml))
    assert meta == {} and err is not None and "nested" in err, err
    assert "body under deep front matter" in body


@pytest.mark.parametrize(
    "text", ["---\na: &a [*a]\n---\nbody\n", "---\na: &a {b: *a}\n---\nbody\n"], ids=["list", "mapping"]
)
def test_a_cyclic_alias_is_refused(text):
    meta, _, err = split_front_matter(text)
    assert meta == {} and "nested" in (err or ""), err


def test_aliases_that_stay_small_are_still_read():
    meta, _, err = split_front_matter("---\nd: &d {x: 1}\ne:\n  <<: *d\n  y: 2\nl: [*d, *d]\n---\nbody\n")
    assert err is None and meta == {"d": {"x": 1}, "e": {"x": 1, "y": 2}, "l": [{"x": 1}, {"x": 1}]}


def test_a_huge_front_matter_block_is_not_parsed():
    text = "---\n" + "".join(f"k{i}: {'v' * 60}\n" for i in range(8000)) + "---\n\nThe body.\n"
    meta, body, err = split_front_matter(text)
    assert meta == {} and "larger than" in (err or "") and body.strip() == "The body."


def test_metadata_past_the_cap_fails_the_item_in_one_line():
    src = Source(uri="file:///docs/m.eml", content=b"x", metadata={})
    with pytest.raises(ExtractError, match="metadata larger than"):
        build_document(src, title="t", blocks=[Block("text")], source_type="email", metadata={"to": ["a" * 1000] * 400})
