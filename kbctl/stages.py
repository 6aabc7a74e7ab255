"""The stages as NDJSON streams, so they can run as separate processes joined by pipes.

    kbctl fetch docs/ | kbctl extract | kbctl chunk -n NS | kbctl embed -n NS | kbctl store -n NS

Every line is one JSON object with a ``type``:

- ``source``: ``{"type": "source", "source": {...Source}}`` (bytes as base64)
- ``document``: ``{"type": "document", "source_uri", "source_sha", "source_kind", "document": {...}}``
- ``chunked``: a document record plus ``"chunks": [...]``
- ``embedded``: a chunked record plus ``"embeddings": [[...], ...]`` aligned with the chunks
- ``error``: ``{"type": "error", "error": {...ItemError}}``: passed through to ``store``'s run ledger

A stage passes through the records it does not handle, so any stage's output can be saved,
inspected and replayed. ``store`` groups consecutive records of one source, skips sources whose
version is already stored, and writes through the same code as ``kbctl ingest``, so the pipe and
``ingest`` produce the same store.
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterable, Iterator

import numpy as np

from .chunk import chunk_document
from .config import Profile
from .errors import KbctlError, UsageError
from .pipeline import Item, source_hash
from .types import Chunk, Document, ItemError, Source, content_hash

__all__ = ["read_records", "write_records", "source_records", "extract_records", "chunk_records", "embed_records", "store_items"]


def read_records(stream: IO[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """Parse NDJSON records, validating each line's shape; a bad line is a UsageError naming it."""
    for n, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"stdin line {n}: not JSON ({e.msg})", hint="stages read the NDJSON another kbctl stage wrote") from None
        if not isinstance(rec, dict) or rec.get("type") not in ("source", "document", "chunked", "embedded", "error"):
            raise UsageError(f"stdin line {n}: not a kbctl stage record", hint="expected a 'type' of source, document, chunked, embedded or error")
        yield rec


def write_records(records: Iterable[dict[str, Any]], out: IO[str]) -> int:
    n = 0
    for r in records:
        out.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
        n += 1
    out.flush()
    return n


def source_records(items: Iterable[Source | ItemError]) -> Iterator[dict[str, Any]]:
    for it in items:
        if isinstance(it, ItemError):
            yield {"type": "error", "error": it.to_json()}
        else:
            yield {"type": "source", "source": it.to_json()}


def extract_records(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """source → document records (one or more per source); failures become error records."""
    from .extract import extract

    for rec in records:
        if rec["type"] != "source":
            yield rec
            continue
        src = Source.from_json(rec["source"])
        try:
            docs = extract(src)
        except KbctlError as e:
            yield {"type": "error", "error": ItemError("extract", src.uri, type(e).__name__, e.message).to_json()}
            continue
        except Exception as e:
            yield {"type": "error", "error": ItemError("extract", src.uri, type(e).__name__, str(e)).to_json()}
            continue
        sha = content_hash(src.content)
        for d in docs:
            yield {"type": "document", "source_uri": src.uri, "source_sha": sha, "source_kind": src.kind, "document": d.to_json()}


def chunk_records(records: Iterable[dict[str, Any]], profile: Profile) -> Iterator[dict[str, Any]]:
    """document → chunked records, measured in the profile's tokens."""
    from .embed import get_tokenizer

    tok = get_tokenizer(profile)
    for rec in records:
        if rec["type"] != "document":
            yield rec
            continue
        doc = Document.from_json(rec["document"])
        yield {**rec, "type": "chunked", "chunks": [c.to_json() for c in chunk_document(doc, profile, tok)]}


class _LazyEmbedder:
    """Loads the model only if something actually needs embedding."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._e: Any = None  # the Embedder, loaded on first use

    def __call__(self, texts: list[str]):
        if self._e is None:
            from .embed import get_embedder

            self._e = get_embedder(self.profile)
        return self._e.embed_documents(texts)


def embed_records(records: Iterable[dict[str, Any]], profile: Profile, cache=None, batch: int = 256) -> Iterator[dict[str, Any]]:
    """chunked → embedded records. ``cache(hashes) -> {hash: vector}`` avoids re-embedding stored chunks.

    Vectors travel as the exact float32 values (a double's shortest repr round-trips), so a piped
    store holds the same vectors as ``kbctl ingest``.
    """
    embed = _LazyEmbedder(profile)
    pending: list[dict[str, Any]] = []
    for rec in records:
        if rec["type"] != "chunked":
            yield from _embed_pending(pending, cache, embed)
            pending = []
            yield rec
            continue
        pending.append(rec)
        if sum(len(r["chunks"]) for r in pending) >= batch:
            yield from _embed_pending(pending, cache, embed)
            pending = []
    yield from _embed_pending(pending, cache, embed)


def _embed_pending(pending, cache, embed: _LazyEmbedder) -> Iterator[dict[str, Any]]:
    if not pending:
        return
    chunks = [Chunk.from_json(c) for r in pending for c in r["chunks"]]
    known = dict(cache([c.content_hash for c in chunks])) if cache else {}
    todo = {c.content_hash: c for c in chunks if c.content_hash not in known}
    if todo:
        known.update(zip(todo, embed([c.embed_text for c in todo.values()])))
    for r in pending:
        hashes = [Chunk.from_json(c).content_hash for c in r["chunks"]]
        yield {**r, "type": "embedded", "embeddings": [np.asarray(known[h], dtype=np.float32).tolist() for h in hashes]}


def store_items(records: Iterable[dict[str, Any]], profile: Profile, versions) -> Iterator[Item | ItemError | tuple]:
    """Group embedded records by source into Items; ``versions(uris)`` gives stored source versions."""
    group: list[dict[str, Any]] = []
    for rec in records:
        if rec["type"] == "error":
            yield from _flush_group(group, profile, versions)
            group = []
            yield ItemError.from_json(rec["error"])
            continue
        if rec["type"] != "embedded":
            raise UsageError(f"store needs embedded records, got {rec['type']!r}", hint="pipe through `kbctl embed -n NS` first")
        if group and group[0]["source_uri"] != rec["source_uri"]:
            yield from _flush_group(group, profile, versions)
            group = []
        group.append(rec)
    yield from _flush_group(group, profile, versions)


def _flush_group(group, profile, versions) -> Iterator[Item | tuple]:
    if not group:
        return
    first = group[0]
    h = source_hash(first["source_sha"], profile)
    known = versions([first["source_uri"]]).get(first["source_uri"])
    if known and known[0] == h:
        yield ("unchanged", len(known[1]))
        return
    docs, vectors = [], {}
    for r in group:
        chunks = tuple(Chunk.from_json(c) for c in r["chunks"])
        for c, v in zip(chunks, r["embeddings"]):
            vectors[c.content_hash] = np.asarray(v, dtype=np.float32)
        docs.append((Document.from_json(r["document"]), chunks))
    yield Item(first["source_uri"], h, first.get("source_kind", "file"), tuple(docs), vectors)
