"""The ``semantic`` strategy: a section's sentences in runs that stay on one topic (the similarity of
consecutive sentences' embeddings), within the size limit; a code block or a table one unit, or,
longer than a chunk, cut on its own as the ``structure`` strategy cuts it."""

from __future__ import annotations

from itertools import chain, groupby
from typing import Iterable, Iterator

from ..config import Profile
from ..embed.tokens import Tokenizer
from ..extract.tables import table_start
from ..types import Block, Chunk, Document
from .code import _code_pieces
from .sentences import _line_windows, split_sentences
from .structure import _header, _longer_than, _WholeText
from .tables import _table_pieces
from .units import CUT_MARK, _Unit


def _semantic(doc: Document, profile: Profile, tok: Tokenizer, embed) -> list[Chunk]:
    """Sentence runs that stay on one topic, within the size limit, never across sections/pages; a
    code block or a table is one unit, or, longer than a chunk, cut on its own as ``_fixed`` cuts it."""
    if embed is None:
        from ..embed import get_embedder

        embed = get_embedder(profile).embed_documents
    size, threshold = profile.chunk.size, profile.chunk.semantic_threshold
    chunks: list[Chunk] = []
    for heading, page, blocks in _sections(doc.blocks):
        header = _header(doc.title, heading)
        limit = min(size, profile.max_tokens - tok.special_tokens - (tok.count(header) + 2 if header else 0))
        counted: dict[int, int] = {}  # a code block or table that fits: its tokens, counted once
        for alone, run in groupby(blocks, key=_longer_than(limit, tok, counted, code=False)):
            pieces: Iterable[tuple[int, int, str]]
            if alone:  # a code block or table longer than a chunk: cut as the fixed strategy cuts it
                pieces = chain.from_iterable(_alone_pieces(b, _WholeText(doc.text), limit, tok) for b in run)
            else:
                units = [u for b in run for u in _semantic_units(doc.text, b, limit, tok, counted.pop(b.start, None))]
                pieces = _topic_pieces(doc.text, units, limit, threshold, embed)
            for start, end, text in pieces:
                chunks.append(Chunk(doc.uri, len(chunks), text, tok.count(text), start, end, heading, page, header))
    return chunks


def _topic_pieces(text: str, units: list[_Unit], limit: int, threshold: float, embed) -> list[tuple[int, int, str]]:
    """Runs of ``units`` that stay on one topic (the similarity of consecutive units' embeddings at
    least ``threshold``), within ``limit`` tokens."""
    import numpy as np

    if not units:
        return []
    vecs = np.asarray(embed([_marked(text, u) for u in units]), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
    sims = (vecs[1:] * vecs[:-1]).sum(axis=1)
    run: list[_Unit] = [units[0]]
    runs = []
    for u, sim in zip(units[1:], sims):
        if sum(x.tokens for x in run) + u.tokens > limit or sim < threshold:
            runs.append(run)
            run = []
        run.append(u)
    runs.append(run)
    return [(r[0].start, r[-1].end, (CUT_MARK if r[0].continues else "") + text[r[0].start : r[-1].end]) for r in runs]


def _marked(text: str, u: _Unit) -> str:
    return (CUT_MARK if u.continues else "") + text[u.start : u.end]


def _alone_pieces(block: Block, text, limit: int, tok: Tokenizer) -> Iterator[tuple[int, int, str]]:
    if table_start(block.text) is not None:
        return _table_pieces(block, text, limit, tok)
    return _code_pieces(block, text, limit, tok)


def _semantic_units(text: str, block: Block, limit: int, tok: Tokenizer, counted: int | None) -> Iterator[_Unit]:
    """A block's units for the semantic strategy: a code block or table that fits is one (its
    tokens ``counted`` already), a paragraph its sentences (``_sentence_units``)."""
    if counted is not None:
        yield _Unit(block.start, block.start + len(block.text), counted, True)
        return
    yield from _sentence_units(text, block, limit, tok)


def _sentence_units(text: str, block: Block, limit: int, tok: Tokenizer) -> Iterator[_Unit]:
    for s, e in split_sentences(text, block.start, block.start + len(block.text)):
        n = tok.count(text[s:e])
        if n <= limit:
            yield _Unit(s, e, n, False)
        else:
            for ws, we, wm, goes_on in _line_windows(text, s, e, limit, tok):
                yield _Unit(ws, we, wm, False, goes_on)


def _sections(blocks: tuple[Block, ...]) -> Iterator[tuple[tuple[str, ...], int | None, list[Block]]]:
    """Runs of consecutive blocks that share a heading path and a page."""
    run: list[Block] = []
    for b in blocks:
        if run and (b.heading_path != run[0].heading_path or b.page != run[0].page):
            yield run[0].heading_path, run[0].page, run
            run = []
        run.append(b)
    if run:
        yield run[0].heading_path, run[0].page, run
