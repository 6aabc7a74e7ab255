"""sample_corpus/README.md's table counts what kbctl makes of each folder: its files, and the
documents the extract stage makes of them (an mbox's messages, a feed's entries, and an e-mail's
attachments each a document of its own, as ``kbctl ingest`` stores them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kbctl.ingest.fetch import fetch
from kbctl.ingest.steps import extract_source
from kbctl.types import ItemError

CORPUS = Path(__file__).resolve().parents[2] / "sample_corpus"


def _table() -> dict[str, tuple[int, int]]:
    """Folder → (files, documents), as the README's table says."""
    rows = re.findall(
        r"^\| `([^`]+)/` \| `\w+` \| [^|]+ \| (\d+) \| (\d+) \|$", (CORPUS / "README.md").read_text(), re.M
    )
    total = re.search(
        r"^\| \*\*total\*\* \| \| \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|$", (CORPUS / "README.md").read_text(), re.M
    )
    assert rows and total, "the table of sample_corpus/README.md is not where it was"
    table = {folder: (int(files), int(docs)) for folder, files, docs in rows}
    table["total"] = (int(total[1]), int(total[2]))
    return table


def _counted(folder: str) -> tuple[int, int]:
    sources = list(fetch([str(CORPUS / folder)]))
    assert not [s for s in sources if isinstance(s, ItemError)]
    docs = [extract_source(s) for s in sources]  # type: ignore[arg-type]
    assert not [d for d in docs if isinstance(d, ItemError)]
    return len(sources), sum(len(d) for d in docs)  # type: ignore[arg-type]


@pytest.mark.parametrize("folder", sorted(_table().keys() - {"total"}))
def test_the_readme_counts_the_files_and_documents_of_each_folder(folder):
    assert _table()[folder] == _counted(folder)


def test_the_readme_totals_are_the_sums_of_its_rows():
    table = _table()
    total = table.pop("total")
    assert total == (sum(f for f, _ in table.values()), sum(d for _, d in table.values()))
