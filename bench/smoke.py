"""Tiny BEIR collections for a smoke pass (``python bench/run.py --smoke``), made from sample_corpus/.

A smoke pass shows that every part of the benchmarks still runs; it measures nothing. It must not
depend on ../shared/evaldata (research-only licences; CI has no copy), so the collections the parts
read (``scifact``, ``cranfield``, ``cisi``) are written at run time in BEIR's layout: ``corpus.jsonl``
(one document a paragraph of the sample corpus's Markdown and text files, titled by its file),
``queries.jsonl`` (the first words of some documents) and ``qrels/test.tsv`` and ``qrels/train.tsv``
(each query judges the document it was taken from relevant). Each collection takes every third
paragraph from its own offset, so the three differ.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from common import REPO

COLLECTIONS = ("scifact", "cranfield", "cisi")
QUERY_WORDS = 8
QUERY_EVERY = 3  # one query per this many documents


def paragraphs() -> list[tuple[str, str]]:
    """(title, paragraph) of the sample corpus's Markdown and text files, in path order."""
    out = []
    files = sorted(p for p in (REPO / "sample_corpus").rglob("*") if p.suffix in (".md", ".txt"))
    for path in files:
        if path.name == "README.md":
            continue
        for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            text = " ".join(para.split())
            if len(text) >= 80 and not text.startswith("#"):
                out.append((path.stem.replace("-", " "), text))
    return out


def make_collections(folder: Path) -> Path:
    """Write the tiny collections under ``folder`` (made if missing); returns ``folder``."""
    paras = paragraphs()
    for offset, name in enumerate(COLLECTIONS):
        base = folder / name
        (base / "qrels").mkdir(parents=True, exist_ok=True)
        docs = [(str(100 + i), title, text) for i, (title, text) in enumerate(paras[offset::3])]
        with (base / "corpus.jsonl").open("w", encoding="utf-8") as f:
            for did, title, text in docs:
                f.write(json.dumps({"_id": did, "title": title, "text": text}) + "\n")
        judged = [(f"q{did}", " ".join(text.split()[:QUERY_WORDS]), did) for did, _, text in docs[::QUERY_EVERY]]
        with (base / "queries.jsonl").open("w", encoding="utf-8") as f:
            for qid, text, _ in judged:
                f.write(json.dumps({"_id": qid, "text": text, "metadata": {}}) + "\n")
        for split, part in (("test", judged[0::2]), ("train", judged[1::2])):
            rows = ["query-id\tcorpus-id\tscore", *(f"{qid}\t{did}\t1" for qid, _, did in part)]
            (base / "qrels" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder
