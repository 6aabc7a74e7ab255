"""The shapes of the stages' NDJSON records, as the stages write them (``to_json`` of ``Source``,
``Document``, ``Block``, ``Chunk``, ``ItemError``; ``kbctl.ingest.stages``), validated by pydantic
when a stage reads them from stdin. Lax: ``1.0`` is a position of 1 and ``"x"`` is not; extra keys
pass through. Imported on first use only: ``kbctl ingest`` never reads records.

No ``from __future__ import annotations`` here: pydantic reads these annotations at run time.
"""

import functools
from typing import Any

from pydantic import TypeAdapter
from typing_extensions import NotRequired, TypedDict

__all__ = ["shapes"]

Obj = dict[str, Any]


class SourceShape(TypedDict):
    uri: str
    content: NotRequired[str]
    media_type: NotRequired[str | None]
    kind: NotRequired[str]
    metadata: NotRequired[Obj]


class BlockShape(TypedDict):
    text: str
    start: NotRequired[int]
    heading_path: NotRequired[list[str] | None]
    page: NotRequired[int | None]
    boxes: NotRequired[list[list[float]] | None]


class DocumentShape(TypedDict):
    uri: str
    title: str
    text: str
    blocks: NotRequired[list[BlockShape] | None]
    source_type: str
    metadata: NotRequired[Obj]
    parent_uri: NotRequired[str | None]
    content_hash: NotRequired[str]
    notes: NotRequired[list[tuple[str, str]] | None]
    acl: NotRequired[list[str] | str | None]


class ChunkShape(TypedDict):
    document_uri: str
    position: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    heading_path: NotRequired[list[str] | None]
    page: NotRequired[int | None]
    header: NotRequired[str]
    content_hash: NotRequired[str]
    boxes: NotRequired[list[list[float]] | None]


class ErrorShape(TypedDict):
    stage: str
    source: str
    error_class: str
    message: str


class SourceRecord(TypedDict):
    source: SourceShape


class DocumentRecord(TypedDict):
    source_uri: str
    source_sha: NotRequired[str]
    source_kind: NotRequired[str]
    extract_revision: NotRequired[str]
    document: DocumentShape


class ChunkedRecord(DocumentRecord):
    chunks: list[ChunkShape]


class EmbeddedRecord(ChunkedRecord):
    embeddings: list[Any]  # each a vector: one that is not is the store's ItemError, as before


class ErrorRecord(TypedDict):
    error: ErrorShape


@functools.cache
def shapes() -> dict[str, TypeAdapter]:
    """The validator of each record ``type``."""
    kinds = {
        "source": SourceRecord,
        "document": DocumentRecord,
        "chunked": ChunkedRecord,
        "embedded": EmbeddedRecord,
        "error": ErrorRecord,
    }
    return {kind: TypeAdapter(shape) for kind, shape in kinds.items()}
