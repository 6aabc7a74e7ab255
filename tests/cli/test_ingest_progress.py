"""The ingest progress display (``kbctl.cli.ingest._progress``) on a terminal."""

from __future__ import annotations

import io

from rich.console import Console

from kbctl.cli import ingest as cli_ingest


def test_a_whole_repack_after_an_upgrade_is_announced(monkeypatch):
    """The lexical step's one-off repack of a namespace packed before migration 017 takes minutes at
    a million chunks: the display prints a line naming the namespace and why, before it starts, as
    inert text (a namespace name is not markup)."""
    out = io.StringIO()
    monkeypatch.setattr(cli_ingest, "err", Console(file=out, force_terminal=True, width=200))
    on, stop = cli_ingest._progress(False)
    on("repacking", {"namespace": "docs[bold]", "reason": "its segments were packed before the forward index"})
    on("stored", {"documents": 2, "chunks": 3, "embedded": 3})
    stop()
    text = out.getvalue()
    assert "packing the lexical postings of docs[bold] again, whole, once" in text
    assert "before the forward index" in text
