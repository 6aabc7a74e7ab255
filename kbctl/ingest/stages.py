"""The stages as NDJSON streams, so they can run as separate processes joined by pipes.

    kbctl fetch docs/ | kbctl extract | kbctl chunk -n NS | kbctl embed -n NS | kbctl store -n NS

Every line is one JSON object with a ``type``:

- ``source``: ``{"type": "source", "source": {...Source}}`` (bytes as base64)
- ``document``: ``{"type": "document", "source_uri", "source_sha", "source_kind", "extract_revision", "document": {...}}``
  (``extract_revision``: ``kbctl.extract.source_revision`` under the ``[extract]`` settings, part of
  the source's hash in ``store``)
- ``chunked``: a document record plus ``"chunks": [...]``
- ``embedded``: a chunked record plus ``"embeddings": [[...], ...]`` aligned with the chunks
- ``error``: ``{"type": "error", "error": {...ItemError}}``: passed through to ``store``'s run ledger

A stage passes through the records it does not handle, so any stage's output can be saved,
inspected and replayed. Apart from ``embed``'s batching, this module only converts records to
typed values and back; the work is the ingest steps'. ``extract`` and ``chunk`` call
``steps.extract_source`` and ``steps.chunk_source`` (an item fails with the same ``ItemError`` as
in ``kbctl ingest``), ``embed`` finds or makes vectors through ``embedding.Embedding`` (the
writer's way), and ``store`` groups consecutive records of one source into an ``Item`` for
``KnowledgeBase.store``, which runs them through the same lock, ledger and writer as ``kbctl
ingest``: the pipe and ``ingest`` produce the same store and the same run ledger.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import IO, Any, Iterable, Iterator

import numpy as np

from ..config import Profile
from ..errors import UsageError
from ..extract import source_revision
from ..types import Chunk, Document, ItemError, Source, content_hash
from .embedding import Embedding, Lookup
from .items import Item
from .steps import chunk_source, extract_source, source_hash

__all__ = ["read_records", "source_records", "extract_records", "chunk_records", "embed_records", "store_items"]


#: How deeply a record's values (metadata) may nest; deeper is refused before anything recurses into it.
MAX_RECORD_DEPTH = 64


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and objects more than ``MAX_RECORD_DEPTH`` deep (without recursing)."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_RECORD_DEPTH:
            return True
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
    return False


def read_records(stream: IO[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """Parse NDJSON records, validating each line's shape; a bad line is a UsageError naming it."""
    for n, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(
                f"stdin line {n}: not JSON ({e.msg})", hint="stages read the NDJSON another kbctl stage wrote"
            ) from None
        except RecursionError:
            rec = None  # nested past the parser's limit: refused below as too deep
        if rec is None or _too_deep(rec):
            raise UsageError(
                f"stdin line {n}: nested more than {MAX_RECORD_DEPTH} levels deep",
                hint="stages read the NDJSON another kbctl stage wrote",
            )
        if not isinstance(rec, dict) or rec.get("type") not in ("source", "document", "chunked", "embedded", "error"):
            raise UsageError(
                f"stdin line {n}: not a kbctl stage record",
                hint="expected a 'type' of source, document, chunked, embedded or error",
            )
        _check_shape(rec, n)
        yield rec


def _check_shape(rec: dict[str, Any], n: int) -> None:
    """A UsageError naming the line and the field unless ``rec`` has its type's fields, each of its
    type (``kbctl.ingest.shapes``): a stage then never meets a missing key, a null text or a string position."""
    import pydantic

    from .shapes import shapes

    kind = rec["type"]
    try:
        shapes()[kind].validate_python(rec)
    except pydantic.ValidationError as e:
        first = e.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "record"
        raise UsageError(
            f"stdin line {n}: a {kind} record's {field}: {first['msg']}",
            hint="stages read the NDJSON another kbctl stage wrote",
        ) from None
    if kind == "source":  # its bytes, as base64: decoded once here to be refused here, not in extract
        try:
            base64.b64decode(rec["source"].get("content", ""), validate=True)
        except (binascii.Error, ValueError):
            raise UsageError(
                f"stdin line {n}: a source record's source.content is not base64",
                hint="stages read the NDJSON another kbctl stage wrote",
            ) from None


def source_records(items: Iterable[Source | ItemError]) -> Iterator[dict[str, Any]]:
    for it in items:
        if isinstance(it, ItemError):
            yield {"type": "error", "error": it.to_json()}
        else:
            yield {"type": "source", "source": it.to_json()}


def extract_records(records: Iterable[dict[str, Any]], options: Any = None) -> Iterator[dict[str, Any]]:
    """source → document records (one or more per source); a failure is an error record
    (``options``: the ``[extract]`` settings as an ``extract.ExtractOptions``)."""
    for rec in records:
        if rec["type"] != "source":
            yield rec
            continue
        src = Source.from_json(rec["source"])
        docs = extract_source(src, options)
        if isinstance(docs, ItemError):
            yield {"type": "error", "error": docs.to_json()}
            continue
        sha, revision = content_hash(src.content), source_revision(src, options)
        for d in docs:
            yield {
                "type": "document",
                "source_uri": src.uri,
                "source_sha": sha,
                "source_kind": src.kind,
                "extract_revision": revision,
                "document": d.to_json(),
            }


def chunk_records(records: Iterable[dict[str, Any]], profile: Profile) -> Iterator[dict[str, Any]]:
    """document → chunked records, measured in the profile's tokens; a source that fails is one error record."""
    from ..embed import get_tokenizer

    tok = get_tokenizer(profile)
    group: list[dict[str, Any]] = []  # the documents of one source arrive together
    for rec in records:
        if rec["type"] == "document" and (not group or group[0]["source_uri"] == rec["source_uri"]):
            group.append(rec)
            continue
        yield from _chunk_group(group, profile, tok)
        group = [rec] if rec["type"] == "document" else []
        if not group:
            yield rec
    yield from _chunk_group(group, profile, tok)


def _chunk_group(group: list[dict[str, Any]], profile: Profile, tok) -> Iterator[dict[str, Any]]:
    if not group:
        return
    chunked = chunk_source(group[0]["source_uri"], [Document.from_json(r["document"]) for r in group], profile, tok)
    if isinstance(chunked, ItemError):
        yield {"type": "error", "error": chunked.to_json()}
        return
    for rec, (_, chunks) in zip(group, chunked):
        yield {**rec, "type": "chunked", "chunks": [c.to_json() for c in chunks]}


def embed_records(
    records: Iterable[dict[str, Any]], profile: Profile, cache: Lookup | None = None, batch: int = 256
) -> Iterator[dict[str, Any]]:
    """chunked → embedded records. ``cache(hashes) -> {hash: vector}`` avoids re-embedding stored chunks.

    Vectors travel as the exact float32 values (a double's shortest repr round-trips), so a piped
    store holds the same vectors as ``kbctl ingest``.
    """
    embedding = Embedding(profile, cache)
    pending: list[dict[str, Any]] = []
    for rec in records:
        if rec["type"] != "chunked":
            yield from _embed_pending(pending, embedding)
            pending = []
            yield rec
            continue
        pending.append(rec)
        if sum(len(r["chunks"]) for r in pending) >= batch:
            yield from _embed_pending(pending, embedding)
            pending = []
    yield from _embed_pending(pending, embedding)


def _embed_pending(pending, embedding: Embedding) -> Iterator[dict[str, Any]]:
    if not pending:
        return
    chunks = [Chunk.from_json(c) for r in pending for c in r["chunks"]]
    known = embedding.vectors({c.content_hash: c.embed_text for c in chunks})
    for r in pending:
        hashes = [Chunk.from_json(c).content_hash for c in r["chunks"]]
        yield {**r, "type": "embedded", "embeddings": [np.asarray(known[h], dtype=np.float32).tolist() for h in hashes]}


def store_items(records: Iterable[dict[str, Any]], profile: Profile) -> Iterator[Item | ItemError]:
    """Group embedded records by source into ``Item``s (versioned with ``profile``); error records into ``ItemError``s."""
    group: list[dict[str, Any]] = []
    for rec in records:
        if rec["type"] == "error":
            yield from _item(group, profile)
            group = []
            yield ItemError.from_json(rec["error"])
            continue
        if rec["type"] != "embedded":
            raise UsageError(
                f"store needs embedded records, got {rec['type']!r}", hint="pipe through `kbctl embed -n NS` first"
            )
        if group and group[0]["source_uri"] != rec["source_uri"]:
            yield from _item(group, profile)
            group = []
        group.append(rec)
    yield from _item(group, profile)


def _vector(v: Any) -> Any:
    """``v`` as float32, or as it came when it is not a list of numbers (the store refuses it, as an ItemError)."""
    try:
        return np.asarray(v, dtype=np.float32)
    except (TypeError, ValueError):
        return v


def _item(group: list[dict[str, Any]], profile: Profile) -> Iterator[Item | ItemError]:
    if not group:
        return
    first = group[0]
    problem = _group_problem(group)
    if problem:  # stored, it would leave the namespace failing verify: the item fails instead
        yield ItemError("store", first["source_uri"] or "(empty uri)", "UsageError", problem)
        return
    docs, vectors = [], {}
    for r in group:
        chunks = tuple(Chunk.from_json(c) for c in r["chunks"])
        for c, v in zip(chunks, r["embeddings"]):
            vectors[c.content_hash] = _vector(v)
        docs.append((Document.from_json(r["document"]), chunks))
    # the revision of the extractor that wrote the records: none (an earlier kbctl's) hashes as before,
    # and the next `kbctl ingest` of the source reads it again with this one's
    h = source_hash(first["source_sha"], profile, first.get("extract_revision") or "")
    yield Item(first["source_uri"], h, first.get("source_kind", "file"), tuple(docs), vectors)


def _group_problem(group: list[dict[str, Any]]) -> str | None:
    """Why one source's embedded records cannot be stored as they are (records ``kbctl chunk``
    writes never are so): a document without chunks, an empty uri, a parent not among the
    source's documents, a NUL in a chunk's text."""
    uris = {r["document"]["uri"] for r in group}
    for r in group:
        doc = r["document"]
        if not r["source_uri"] or not doc["uri"]:
            return "a record's source_uri or document.uri is empty"
        if not r["chunks"]:
            return f"document {doc['uri']} has no chunks (kbctl chunk makes at least one of a document with text)"
        parent = doc.get("parent_uri")
        if parent and parent not in uris:
            return f"document {doc['uri']} names a parent_uri, {parent}, that is not among its source's documents"
        for c in r["chunks"]:  # a document's text is cleaned as it is read; a chunk's is kbctl chunk's, from it
            if "\x00" in c["text"] or "\x00" in (c.get("header") or ""):
                return f"chunk {c['position']} of {doc['uri']} holds a NUL character, which PostgreSQL's text cannot"
    return None
