"""The prompt-ready context block (``kbctl.search.context``) as a model reads it: a passage cut to
fit keeps the text's own lines (a table's rows, a code block's lines), and a code fence opened in a
passage is closed before the next passage's citation."""

from __future__ import annotations

import re

import pytest

from kbctl.search.context import context_blocks, estimate_tokens, format_context
from kbctl.types import Hit, SearchResult

ROWS = [f"| SKU-{i:04d} | Widget {i} — ü | {i * 3.5:.2f} | ✓ |" for i in range(120)]
TABLE = "| sku | name | price | stock |\n|---|---|---|---|\n" + "\n".join(ROWS)
CODE_LINES = [f"    result_{i} = compute_checksum(payload[{i}], seed=0x{i:04x})  # ünicode" for i in range(120)]
CODE = "How the checksum routine works:\n\n```python\ndef compute_all(payload):\n" + "\n".join(CODE_LINES) + "\n```"
PROSE = "\n\n".join(
    " ".join(f"Paragraph {p} sentence {s} says something about Größe, café and 東京." for s in range(6))
    for p in range(12)
)


def _hit(rank: int, text: str) -> Hit:
    return Hit(rank, 1.0 / rank, rank, rank, f"d{rank}.md", f"D{rank}", text, "kb", {}, f"D{rank} (d{rank}.md)")


def _result(*texts: str) -> SearchResult:
    return SearchResult("q", ("kb",), "hybrid", "hybrid", tuple(_hit(i + 1, t) for i, t in enumerate(texts)))


def _passage(block: str) -> str:
    """A block's passage: without its ``[n] citation`` line and the marker of a cut."""
    body = block.split("\n", 1)[1]
    return body.removesuffix("\n").removesuffix(" […]")


def _fences(text: str) -> int:
    return sum(1 for line in text.splitlines() if re.match(r"\s*(```|~~~)", line))


@pytest.mark.parametrize("budget", [120, 300, 700])
def test_a_table_cut_to_fit_keeps_whole_rows_on_their_lines(budget):
    (_, block), *_ = context_blocks(_result(TABLE), budget)
    passage = _passage(block)
    assert passage != TABLE and TABLE.startswith(passage)  # cut, and its text as stored
    lines = passage.split("\n")
    assert lines[:2] == ["| sku | name | price | stock |", "|---|---|---|---|"]
    assert all(line in ROWS for line in lines[2:]), lines[-1]  # no row cut in its middle
    assert estimate_tokens(format_context(_result(TABLE), budget)) <= budget


@pytest.mark.parametrize("budget", [150, 400, 900])
def test_a_code_block_cut_to_fit_keeps_its_lines_and_its_fence_is_closed(budget):
    (_, block), *_ = context_blocks(_result(CODE), budget)
    passage = _passage(block)
    assert _fences(passage) == 2  # the open fence closed after the last line that fits
    assert passage.endswith("\n```")
    kept = passage.removesuffix("\n```")
    assert CODE.startswith(kept) and kept.split("\n")[-1] in CODE_LINES + ["def compute_all(payload):"]
    assert estimate_tokens(format_context(_result(CODE), budget)) <= budget


def test_a_passage_stored_with_an_open_fence_is_closed_before_the_next_citation():
    opened = "```python\ndef compute_all(payload):\n    result_0 = compute_checksum(payload[0])"
    text = format_context(_result(opened, "Refunds take five business days."), 2000)
    before, after = text.split("[2] ", 1)
    assert _fences(before) % 2 == 0, before  # the second citation is not inside a code block
    assert "Refunds take five business days." in after


@pytest.mark.parametrize("budget", [50, 90, 200, 500])
def test_a_cut_passage_is_the_stored_text_up_to_a_sentence_or_line_end(budget):
    (_, block), *_ = context_blocks(_result(PROSE), budget)
    passage = _passage(block)
    assert PROSE.startswith(passage)  # the paragraph breaks kept, not joined by spaces
    assert passage.endswith(".")
    assert estimate_tokens(block) <= budget


def test_a_cut_of_one_long_line_still_ends_at_a_word():
    line = " ".join(f"word{i}" for i in range(2000))
    (_, block), *_ = context_blocks(_result(line), 50)
    passage = _passage(block)
    assert line.startswith(passage) and line[len(passage)] == " "
