"""The low steps every way into the store shares: the source hash, extract a source, chunk a
source, each source once, and how a failure of one becomes the ``ItemError`` that stands for its item.

``kbctl ingest`` (its producer and writer) and ``kbctl extract``/``kbctl chunk`` (the NDJSON
codec) call these, so an item fails the same way, with the same ``ItemError``, on every path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Any, Iterable, Iterator, Sequence

from .. import chunk as _chunk
from ..chunk import chunk_document, iter_chunks
from ..config import Profile
from ..embed.tokens import chunk_count_revision
from ..errors import KbctlError
from ..types import Chunk, Document, ItemError, LargeDocument, Source, content_hash

log = logging.getLogger(__name__)

__all__ = [
    "source_hash",
    "previous_source_hash",
    "extract_source",
    "chunk_source",
    "chunk_large",
    "ChunkFailed",
    "item_error",
    "batches",
    "once",
]


def source_hash(sha: str, profile: Profile, extractor: str = "") -> str:
    """Version of a source: the hash of its bytes, the settings that decide its chunks and the
    revision of the extractor that reads it (``extractor``: ``kbctl.extract.source_revision``).

    ``max_document_chars`` is a limit, not a chunking setting: changing it (or adding it, as an
    upgrade did) must not make every stored source look changed. What a profile measured in words
    counts (``kbctl.embed.tokens.WORD_COUNT``) is one, added only for such a profile (``hash``), so a
    model's profile hashes as it always did (its tokenizer is its pinned model's). The chunker's
    revision, which names where it cuts (``kbctl.chunk.SENTENCE_ENDS``: at sentence ends, in code blocks
    and tables; the name is the sentence splitter's, whose revisions came first), is one for
    every profile; a source stored under the hash of an earlier revision (``previous_source_hash``)
    is read again only when its chunks hold what the chunker now cuts otherwise
    (``kbctl.chunk.moved_since`` the profile, ``kbctl.ingest.producer``). The extractor's revision (``kbctl.extract.REVISIONS``) is added only
    when it is not "": a format whose extractor never moved hashes as before; a source stored before
    its extractor moved is read again (its unchanged chunks keep their vectors).
    """
    return _hash_of(sha, profile, _chunk.SENTENCE_ENDS, extractor)


def previous_source_hash(sha: str, profile: Profile, revision: str = "", extractor: str = "") -> str:
    """``source_hash`` as it was under an earlier revision of the chunker (``kbctl.chunk.MOVED_SINCE``
    names them: "sentences-2" (session 42) … "cuts-6" (session 46)), or "" before the revision was
    part of it, when sentences ended only before a space; with the extractor's revision of now
    (``extractor``), so a source stored before its extractor moved matches none (it is read again)."""
    return _hash_of(sha, profile, revision, extractor)


def _hash_of(sha: str, profile: Profile, chunker: str, extractor: str = "") -> str:
    chunk = {k: v for k, v in asdict(profile.chunk).items() if k != "max_document_chars"}
    parts: list[Any] = [chunk, profile.max_tokens, profile.fingerprint]
    if count := chunk_count_revision(profile):
        parts.append(count)
    if chunker:
        parts.append(chunker)
    if extractor:  # an object: never taken for the chunker's revision
        parts.append({"extract": extractor})
    settings = json.dumps(parts, sort_keys=True)
    return content_hash(f"{sha}\x00{settings}")


def extract_source(source: Source, options: Any = None) -> tuple[Document, ...] | ItemError:
    """The extract stage for one source: its documents, or the ``ItemError`` that stands for it
    (``options``: an ``extract.ExtractOptions``, the defaults when ``None``)."""
    from ..acl import lift_acl
    from ..extract import extract

    try:
        return tuple(lift_acl(d) for d in extract(source, options))
    except Exception as e:  # an extractor bug must not stop the batch either
        return item_error("extract", source.uri, e)


def chunk_source(source_uri: str, docs: Sequence[Document], profile: Profile, tok) -> tuple | ItemError:
    """The chunk stage for one source's documents: ``((document, chunks), ...)``, or one ``ItemError``."""
    try:
        return tuple((d, tuple(chunk_document(d, profile, tok))) for d in docs)
    except Exception as e:
        return item_error("chunk", source_uri, e)


class ChunkFailed(Exception):
    """The chunker failed on a large document (its cause): the document is rolled back and recorded."""


def chunk_large(large: LargeDocument, profile: Profile, tok) -> Iterator[Chunk]:
    """The chunk stage for one large document: its chunks, made as they are read, with what the
    chunker raises as ``ChunkFailed`` (not taken for the database's refusal of the document)."""
    chunks = iter_chunks(large, profile, tok)
    while True:
        try:
            c = next(chunks)
        except StopIteration:
            return
        except Exception as e:
            raise ChunkFailed() from e
        yield c


def item_error(stage: str, source: str, e: BaseException) -> ItemError:
    """The ``ItemError`` of ``stage`` failing on ``source``: a ``KbctlError``'s message with its
    hint after a ``;`` (the ledger's one line, as for a fetch error: without it `kbctl errors`
    named a corrupt PDF but not what to do), or (a bug, logged with its traceback) the exception's text."""
    if isinstance(e, KbctlError):
        return ItemError(stage, source, type(e).__name__, f"{e.message}; {e.hint}" if e.hint else e.message)
    if isinstance(e, RecursionError):  # hostile nesting (MIME parts, markup) a parser follows recursively: no bug
        return ItemError(stage, source, "ExtractError", "nested too deeply to read (a parser's recursion limit)")
    log.error("%s failed on %s: %s", stage, source, e, exc_info=e)
    return ItemError(stage, source, type(e).__name__, str(e) or type(e).__name__)


def once(sources: Iterable[Source | ItemError]) -> Iterator[Source | ItemError]:
    """Each source once: one given again in the same run (``docs docs/a.md``) is a warning."""
    given: set[str] = set()
    for s in sources:
        if isinstance(s, Source) and s.uri in given:
            yield ItemError(
                "fetch", s.uri, "DuplicateSourceWarning", f"{s.uri} was given more than once in this run; read once"
            )
            continue
        if isinstance(s, Source):
            given.add(s.uri)
        yield s


def batches(items: Iterable, n: int, max_bytes: int | None = None) -> Iterator[list]:
    """Lists of ``n`` items, or fewer once the sources among them hold ``max_bytes`` bytes."""
    batch: list = []
    size = 0
    for x in items:
        batch.append(x)
        size += len(x.content) if isinstance(x, Source) else 0
        if len(batch) >= n or (max_bytes is not None and size >= max_bytes):
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
