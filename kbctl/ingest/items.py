"""The values of an ingest: what it is asked (``IngestRun``), what flows from the orchestrator to
the writer (``Item``, ``LargeItem``, ``SourceDone``), and what it did (``RunReport``).

They live here, below both ``pipeline`` and ``writer``, so the writer takes the run it serves
(``writer.consume(conn, run, ...)``) without importing the orchestrator that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterable, Iterator

from ..config import Profile
from ..store import Namespace
from ..types import Chunk, Document, ItemError, Source

__all__ = [
    "IngestOptions",
    "IngestRun",
    "RunReport",
    "DOCUMENT_COUNTS",
    "CHUNK_COUNTS",
    "ordered_counts",
    "Progress",
    "Item",
    "LargeItem",
    "Restamp",
    "SourceDone",
    "PARTIAL",
    "quiet",
]

Progress = Callable[[str, dict], None]

#: The prefix of the provisional source hash of a source written in parts (``Item.part``).
PARTIAL = "partial:"


def quiet(event: str, data: dict) -> None:
    """The progress of a run nobody watches."""


@dataclass(frozen=True)
class IngestOptions:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    sync: bool = False
    plan: bool = False
    no_wait: bool = False
    follow_links: bool = False
    batch_documents: int = 64
    queue_size: int = 256


@dataclass(frozen=True, eq=False)
class IngestRun:
    """One run as asked for: into which namespace, with which profile, from where, and how.

    The stream enters at fetch with ``targets``, at extract with ``sources`` (records made into
    ``Source``s), or at store with ``items`` (embedded upstream); ``targets`` also names the run in
    the ledger. ``feed_state(conn, namespace)`` keeps feeds' ETags between runs; ``command`` is the
    ledger's name for the run.
    """

    namespace: Namespace
    profile: Profile
    targets: tuple[str, ...] = ()
    sources: Iterable[Source | ItemError] | None = None
    items: Iterable[Item | ItemError] | None = None
    command: str = "ingest"
    options: IngestOptions = IngestOptions()
    fetch_options: Any = None  # a sources.options.FetchOptions; fetch's defaults when None
    extract_options: Any = None  # an extract.ExtractOptions ([extract]: OCR, tables); the defaults when None
    stdin: BinaryIO | None = None
    feed_state: Callable[[Any, Namespace], Any] | None = None
    retry_failed: bool = False
    verify: bool = True
    progress: Progress | None = None
    acl: Any = None  # the namespace's kbctl.acl.AclPolicy; None: documents keep only their own ACLs
    # Stores the targets through a work queue instead of in this process (``kbctl.ingest.workers``):
    # called as distribute(conn, run, report, interruptible) under the lock and the ledger's run, it
    # returns the source URIs seen (for --sync).
    distribute: Callable[..., set[str]] | None = None
    # Why the run was stopped from outside, if it was (the library's handle closed under it: the
    # caller's ``kb.close()``): a run ending in an exception then ends ``interrupted`` as Ctrl-C
    # ends it, not ``failed``, with the reason in its counts (``interrupted``).
    stopped: Callable[[], str | None] | None = None

    @property
    def emit(self) -> Progress:
        """Where the run's progress events go (``progress``, or nowhere)."""
        return self.progress or quiet


# A run's counts, in the order every output gives them (``ingest``, ``worker``, ``runs``).
DOCUMENT_COUNTS = ("new", "changed", "unchanged", "removed", "failed")
CHUNK_COUNTS = ("embedded", "reused", "deleted")


def ordered_counts(counts: dict[str, Any]) -> dict[str, Any]:
    """A run's recorded counts (``{"documents": {...}, "chunks": {...}}``, as the ledger's jsonb
    keeps them: shortest key first) in ``DOCUMENT_COUNTS``/``CHUNK_COUNTS`` order, others after."""
    out = dict(counts)
    for part, order in (("documents", DOCUMENT_COUNTS), ("chunks", CHUNK_COUNTS)):
        c = counts.get(part)
        if isinstance(c, dict):
            out[part] = {k: c[k] for k in order if k in c} | {k: v for k, v in c.items() if k not in order}
    return out


@dataclass
class RunReport:
    """What one ingest run did (or, with ``plan``, would do)."""

    run_id: int | None
    namespace: str
    documents: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DOCUMENT_COUNTS, 0))
    chunks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHUNK_COUNTS, 0))
    tokens_to_embed: int = 0
    errors: list[ItemError] = field(default_factory=list)
    warnings: list[ItemError] = field(default_factory=list)  # recorded, but the items went in
    seconds: float = 0.0
    plan: bool = False
    verify: dict | None = None
    details: dict[str, Any] = field(default_factory=dict)
    ledgered: bool = False  # the errors and warnings are in the ledger already (the workers recorded them)
    embedder: str | None = None  # the backend the model ran on (``kbctl.embed.backend_name``), if it ran
    # With a worker's batch: what each source added to ``documents`` and ``chunks`` (source URI ->
    # {"documents": {...}, "chunks": {...}}), so an item another worker took over is not counted twice.
    by_source: dict[str, dict[str, dict[str, int]]] | None = None

    def add(self, group: str, kind: str, n: int = 1, source: str | None = None) -> None:
        """Count ``n`` into ``documents`` or ``chunks`` (``group``), and to ``source`` when tallied."""
        counts = self.documents if group == "documents" else self.chunks
        counts[kind] = counts.get(kind, 0) + n
        self.attribute(source, group, kind, n)

    def attribute(self, source: str | None, group: str, kind: str, n: int = 1) -> None:
        """Note that ``source`` made ``n`` of a count (``add``s already, or counted whole elsewhere)."""
        if self.by_source is None or source is None or not n:
            return
        counts = self.by_source.setdefault(source, {}).setdefault(group, {})
        counts[kind] = counts.get(kind, 0) + n

    def to_json(self) -> dict[str, Any]:
        d = {
            "run_id": self.run_id,
            "namespace": self.namespace,
            "documents": dict(self.documents),
            "chunks": dict(self.chunks),
            "errors": [e.to_json() for e in self.errors],
            "seconds": round(self.seconds, 3),
        }
        if self.warnings:
            d["warnings"] = [w.to_json() for w in self.warnings]
        if self.details.get("interrupted"):  # why a run stopped from outside was (``IngestRun.stopped``)
            d["interrupted"] = self.details["interrupted"]
        if self.details.get("notes"):  # what an import read but did not store (kb.import_beir)
            d["notes"] = list(self.details["notes"])
        if self.plan:
            d["plan"] = True
            d["tokens_to_embed"] = self.tokens_to_embed
        if self.verify is not None:
            d["verify"] = self.verify
        if self.embedder:
            d["embedder"] = self.embedder
        return d


@dataclass(frozen=True, eq=False)
class Item:
    """One source after extract and chunk (and, from ``kbctl embed``, with vectors) on its way to store."""

    source_uri: str
    source_hash: str
    kind: str
    docs: tuple[tuple[Document, tuple[Chunk, ...]], ...]
    vectors: Any = None  # {chunk hash: vector} when embedded upstream
    part: bool = False  # one of several items of its source (a feed's entry); a SourceDone follows


@dataclass(frozen=True, eq=False)
class LargeItem:
    """One source that is one document too large to hold whole: its ``head`` (the document without
    its text), its length, and its chunks as the orchestrator's chunker makes them, read once, as
    they are stored (``steps.ChunkFailed`` stands for the chunker's failure)."""

    source_uri: str
    source_hash: str
    kind: str
    head: Document
    chars: int
    chunks: Iterator[Chunk]


@dataclass(frozen=True, eq=False)
class Restamp:
    """Stored sources of a batch that are unchanged but stored under their source hash of an earlier
    version (``steps.previous_source_hash``), whose chunks this version makes alike (none holds what
    it cuts otherwise since, ``kbctl.chunk.moved_since``): they are not read again, their documents take the
    current hash. ``sources``: ``(source URI, previous hash, hash, documents)`` each."""

    sources: tuple[tuple[str, str, str, int], ...]


@dataclass(frozen=True, eq=False)
class SourceDone:
    """The end of a source given in parts: its documents (``uris``) were all handed over, stored
    under ``PARTIAL + source_hash``; they take ``source_hash`` now, and the source's other stored
    documents are stale (feeds: with --sync only)."""

    source_uri: str
    source_hash: str
    kind: str
    uris: frozenset[str]
