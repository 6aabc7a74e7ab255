"""Writing and removing documents: each document's old chunks are replaced in one transaction.

A batch of documents is written in one transaction: the old versions (chunks, postings, vocabulary
counts) are removed and the new ones copied in with binary COPY, so a reader sees either the old or
the new version of each document, never half of one, and a killed run leaves no orphans.

One document the database refuses (a constraint, an encoding, a value) costs only itself: the
batch is tried under a savepoint, and when that fails each document is written under its own, so
the others land and the refused one is returned in ``WriteStats.failed`` with the reason.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ..errors import NamespaceNotFound, ProfileMismatchError
from ..textutil.analyze import Analyzer
from ..types import FETCH_FACTS, Chunk, Document, EmbeddedChunk
from .connection import Conn, Cur, one
from .generations import Generation, write_vectors
from .namespaces import Namespace
from .queries import query
from .roles import check_registered, deleted
from .runs import write_lock

# What the writers pass on: documents with their embedded chunks; document URI -> (source URI,
# source hash); other generations' vectors by chunk hash (dual writes).
_Items = Sequence[tuple[Document, Sequence[EmbeddedChunk]]]
_Sources = Mapping[str, tuple[str, str]]
_Extra = Sequence[tuple[Generation, Mapping[str, np.ndarray]]]

log = logging.getLogger(__name__)

__all__ = [
    "write_documents",
    "write_document_stream",
    "DocumentStream",
    "write_chunks",
    "set_source_hash",
    "restamp_sources",
    "keep_documents",
    "refresh_facts",
    "delete_documents",
    "drop_unused_vocabulary",
    "check_present",
    "namespace_deleted",
    "WriteStats",
]

_CHUNK_TYPES = [  # the columns of documents/copy_chunks, in order
    "integer",
    "bigint",
    "bigint",
    "integer",
    "text",
    "integer",
    "integer",
    "integer",
    "text[]",
    "integer",
    "text",
    "jsonb",
    "real",
]


#: Terms whose document frequencies a large document gathers before they are written (``write_chunks``).
_DF_TERMS = 50_000

#: What the database may refuse of one document without the batch being at fault.
# What the database says of one document's values; ProgramLimitExceeded (54000: a uri or term past a
# B-tree row's 2,704 bytes) is an OperationalError to psycopg, and unlisted it failed the whole run.
_REFUSED = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded, ValueError)


@dataclass(frozen=True)
class WriteStats:
    """Documents and chunks written, old versions replaced, and (uri, error class, reason) of the refused."""

    documents: int
    chunks: int
    replaced: int
    failed: tuple[tuple[str, str, str], ...] = ()


def still_active(conn: Conn, ns: Namespace) -> None:
    """Refuse, inside the caller's write transaction (after ``write_lock``), when the generation the
    writer read as active (``ns.generation_id``: its profile embedded the batch) no longer is: a swap
    or rollback committed since the writer last looked (a worker of a run whose coordinator died,
    say), or (``TenantNotFound``) the namespace went with its tenant's delete, which ``write_lock``
    waited for, or (``NamespaceNotFound``) it was deleted alone (``kbctl namespaces delete`` takes
    the write lock too). The flip of a swap takes the write lock too, so a write lands wholly before it (and the
    flip fills the shadow's vectors it lacks) or sees it here."""
    if not ns.generation_id:  # a namespace read without its generation: nothing to compare
        return
    try:
        row = conn.execute(query("generations/active_id"), (ns.id,)).fetchone()
    except psycopg.errors.InsufficientPrivilege:  # the connection acts as the role the delete dropped
        raise deleted(ns.tenant) from None
    if row is None:  # the namespace is gone: with its tenant (``write_lock`` waited for the delete)?
        check_present(conn, ns)  # or alone (``kbctl namespaces delete``, which takes the write lock too)
    if row is None or int(row[0]) != ns.generation_id:
        raise ProfileMismatchError(
            f"namespace {ns.name!r} moved to another generation while this batch was embedded with the old one"
            f" ({ns.profile_name!r}); nothing of it was written",
            hint="run the ingest again: it reads the namespace's new profile",
        )


def namespace_deleted(ns: Namespace, work: str = "ingest") -> NamespaceNotFound:
    """The refusal of a writer whose namespace was deleted under it (``kbctl namespaces delete``):
    an ingest's run (``work="ingest"``) or the build of a generation (``work="reembed"``)."""
    if work == "reembed":
        return NamespaceNotFound(
            f"namespace {ns.name!r} was deleted while this reembed built its vectors; nothing more was written",
            hint=f"'kbctl namespaces delete {ns.name}' ran meanwhile and removed it with all its generations;"
            " there is nothing left to re-embed (ingest its sources again to make it anew)",
        )
    return NamespaceNotFound(
        f"namespace {ns.name!r} was deleted while this run wrote to it; nothing more was written",
        hint=f"'kbctl namespaces delete {ns.name}' ran meanwhile and removed what the run had written; run the"
        " ingest again to make the namespace anew",
    )


def check_present(conn: Conn, ns: Namespace, work: str = "ingest") -> None:
    """Refuse (``namespace_deleted``) when the namespace a run wrote to (or a reembed builds for,
    ``work``) is gone (a run's end: a delete after its last write removed what it wrote), or
    (``TenantNotFound``) went with its tenant."""
    if conn.execute(query("namespaces/exists_id"), (ns.id,)).fetchone() is None:
        check_registered(conn, ns.tenant)
        raise namespace_deleted(ns, work)


def write_documents(
    conn: Conn,
    ns: Namespace,
    items: Sequence[tuple[Document, Sequence[EmbeddedChunk]]],
    analyzer: Analyzer,
    *,
    title_weight: float = 1.0,
    run_id: int | None = None,
    sources: Mapping[str, tuple[str, str]] | None = None,
    extra: Sequence[tuple[Generation, Mapping[str, np.ndarray]]] = (),
) -> WriteStats:
    """Replace the stored versions of these documents with the given ones, each atomically.

    The chunks' vectors go to the namespace's active generation; ``extra`` gives, per other
    generation (a shadow being built, the previous one kept for rollback), its vectors by chunk
    hash: dual writes, in the same transaction (a chunk whose hash is missing there gets none).
    ``sources`` maps a document URI to its (source URI, source hash), for the unchanged-source check.
    A document the database refuses is left out (its old version stays) and listed in ``failed``;
    a child whose parent is refused is left out with it.
    """
    sources = sources or {}
    _check_dimensions(ns, items)
    _check_analyzer(ns, analyzer)
    if not items:
        return WriteStats(0, 0, 0)
    with conn.transaction():
        write_lock(conn, ns.id, ns.tenant)
        still_active(conn, ns)
        try:
            with conn.transaction():  # a savepoint: the whole batch at once, the common case
                return _write(conn, ns, items, analyzer, title_weight, run_id, sources, extra)
        except _REFUSED as e:
            log.info("a batch of %d documents was refused (%s); writing them one by one", len(items), _reason(e))
        return _one_by_one(conn, ns, items, analyzer, title_weight, run_id, sources, extra)


def _one_by_one(
    conn: Conn,
    ns: Namespace,
    items: _Items,
    analyzer: Analyzer,
    title_weight: float,
    run_id: int | None,
    sources: _Sources,
    extra: _Extra,
) -> WriteStats:
    """Each document under its own savepoint: the refused ones are listed, the others written."""
    done = [0, 0, 0]
    failed: list[tuple[str, str, str]] = []
    lost: set[str] = set()
    for item in items:
        d = item[0]
        if d.parent_uri is not None and d.parent_uri in lost:
            failed.append((d.uri, "ParentNotStored", f"its parent {d.parent_uri} was not stored"))
            lost.add(d.uri)
            continue
        try:
            with conn.transaction():
                s = _write(conn, ns, [item], analyzer, title_weight, run_id, sources, extra)
        except _REFUSED as e:
            failed.append((d.uri, type(e).__name__, _reason(e)))
            lost.add(d.uri)
            continue
        done = [done[0] + s.documents, done[1] + s.chunks, done[2] + s.replaced]
    return WriteStats(done[0], done[1], done[2], failed=tuple(failed))


def _reason(e: Exception) -> str:
    """The first line of what the database (or the driver) said."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _write(
    conn: Conn,
    ns: Namespace,
    items: _Items,
    analyzer: Analyzer,
    title_weight: float,
    run_id: int | None,
    sources: _Sources,
    extra: _Extra = (),
) -> WriteStats:
    """Write ``items`` inside the caller's transaction: old versions out, new ones copied in."""
    uris = [d.uri for d, _ in items]
    replaced = _delete(conn, ns, uris)
    doc_ids = _next_ids(conn, "documents", len(items))
    with conn.cursor() as cur:
        _copy_documents(
            cur, ns, [(d, did, len(d.text), len(c)) for (d, c), did in zip(items, doc_ids)], run_id, sources
        )
    nchunks, lengths = write_chunks(
        conn, ns, [(d, did, c) for (d, c), did in zip(items, doc_ids)], analyzer, title_weight, extra
    )
    _add_stats(conn, ns, nchunks, lengths)
    return WriteStats(len(items), nchunks, replaced)


class DocumentStream:
    """One large document being written batch by batch, inside ``write_document_stream``'s savepoint."""

    def __init__(self, conn: Conn, ns: Namespace, doc: Document, analyzer: Analyzer, title_weight: float) -> None:
        self.conn, self.ns, self.doc, self.analyzer, self.title_weight = conn, ns, doc, analyzer, title_weight
        self.id = 0  # the document's stored id, once its row is in
        self.chunks, self.lengths = 0, 0.0
        self.df: Counter[str] = Counter()
        self.stats: WriteStats | None = None  # set when the document is written, or refused

    def write(
        self, batch: Sequence[EmbeddedChunk], extra: Sequence[tuple[Generation, Mapping[str, np.ndarray]]] = ()
    ) -> None:
        """Store one batch of the document's chunks, with their vectors (``extra``: the other
        generations' vectors by chunk hash, as ``write_documents`` takes them)."""
        _check_dimensions(self.ns, [(self.doc, batch)])
        n, length = write_chunks(
            self.conn, self.ns, [(self.doc, self.id, batch)], self.analyzer, self.title_weight, extra, df=self.df
        )
        self.chunks, self.lengths = self.chunks + n, self.lengths + length
        if len(self.df) >= _DF_TERMS:
            _add_vocabulary(self.conn, self.ns, self.df)

    def _open(self, chars: int, run_id: int | None, sources: Mapping[str, tuple[str, str]]) -> int:
        replaced = _delete(self.conn, self.ns, [self.doc.uri])
        (self.id,) = _next_ids(self.conn, "documents", 1)
        with self.conn.cursor() as cur:
            _copy_documents(cur, self.ns, [(self.doc, self.id, chars, 0)], run_id, sources)
        return replaced

    def _close(self, replaced: int) -> None:
        _add_vocabulary(self.conn, self.ns, self.df)
        _add_stats(self.conn, self.ns, self.chunks, self.lengths)
        self.conn.execute(query("documents/set_chunk_count"), (self.chunks, self.ns.id, self.id))
        self.stats = WriteStats(1, self.chunks, replaced)

    def _refused(self, e: Exception) -> None:
        log.info("document %s was refused (%s)", self.doc.uri, _reason(e))
        self.stats = WriteStats(0, 0, 0, failed=((self.doc.uri, type(e).__name__, _reason(e)),))


@contextmanager
def write_document_stream(
    conn: Conn,
    ns: Namespace,
    doc: Document,
    chars: int,
    analyzer: Analyzer,
    *,
    title_weight: float = 1.0,
    run_id: int | None = None,
    source: tuple[str, str] | None = None,
) -> Iterator[DocumentStream]:
    """Replace the stored version of one document whose chunks the caller writes in batches (a
    large one): ``with write_document_stream(...) as out: out.write(batch, extra)`` for each batch;
    ``out.stats`` says what was written once the block ends.

    The document's row goes in first (``chars`` long, its chunk count set once the last batch is
    written), then each batch's chunks, postings and vocabulary: nothing of the document is held
    but one batch, and it all lands in one transaction (a savepoint inside the caller's), so a
    reader sees the old version or the new one, and a killed run leaves the old one. Refused by
    the database: the old version stays and the document is listed in ``out.stats.failed`` (refused
    before the block runs, ``out.stats`` is set already: write nothing). Anything else raised in the
    block (the chunker, the model) rolls the document back and propagates.
    """
    _check_analyzer(ns, analyzer)
    out = DocumentStream(conn, ns, doc, analyzer, title_weight)
    opened = False
    with conn.transaction():
        write_lock(conn, ns.id, ns.tenant)
        still_active(conn, ns)
        try:
            with conn.transaction():
                replaced = out._open(chars, run_id, {doc.uri: source} if source else {})
                opened = True
                yield out
                out._close(replaced)
            return
        except _REFUSED as e:
            out._refused(e)
    if not opened:
        yield out  # refused before its first chunk: the caller writes nothing


def _copy_documents(
    cur: Cur, ns: Namespace, rows: Sequence[tuple[Document, int, int, int]], run_id: int | None, sources: _Sources
) -> None:
    """The rows of documents: (document, id, characters, chunks) each."""
    with _copy_in(cur, "documents") as cp:
        for d, did, chars, nchunks in rows:
            su, sh = sources.get(d.uri, (d.uri, ""))
            cp.write_row(
                (
                    ns.id,
                    did,
                    d.uri,
                    d.parent_uri,
                    su,
                    sh,
                    d.title,
                    d.source_type,
                    d.content_hash,
                    json.dumps(dict(d.metadata), default=str),
                    chars,
                    nchunks,
                    run_id,
                    None if d.acl is None else list(d.acl),
                    fact_keys(d),
                )
            )


def fact_keys(d: Document) -> list[str]:
    """The keys of ``d``'s metadata that are its source's fetch facts (``Document.fetch_facts``):
    kept on its row (``documents.fact_keys``, ``documents.metadata``), never in its chunks'."""
    return sorted(k for k in d.fetch_facts if k in d.metadata)


def write_chunks(
    conn: Conn,
    ns: Namespace,
    rows: Iterable[tuple[Document, int, Sequence[EmbeddedChunk]]],
    analyzer: Analyzer,
    title_weight: float,
    extra: Sequence[tuple[Generation, Mapping[str, np.ndarray]]] = (),
    df: Counter[str] | None = None,
) -> tuple[int, float]:
    """Store one batch of chunks with their vectors, their postings and their terms' document
    frequencies, inside the caller's transaction: ``rows`` are (document, its stored id, chunks).
    The vectors go to the active generation, and ``extra``'s (``write_documents``) to the others.
    Returns how many chunks and their total lexical length (for the namespace's statistics).

    With ``df``, the terms' document frequencies are added to it rather than to the vocabulary (the
    caller writes them, ``_add_vocabulary``, every ``_DF_TERMS`` terms: the batches of one large
    document share most of their terms, and each upsert of a term rewrites its row)."""
    postings: list[tuple[str, int, float, float]] = []
    vectors: list[tuple[int, str, Any]] = []  # (chunk id, hash, vector of the active generation)
    lengths = 0.0
    rows = list(rows)
    chunk_ids = iter(_next_ids(conn, "chunks", sum(len(c) for _, _, c in rows)))
    with conn.cursor() as cur:
        with _copy_in(cur, "chunks") as cp:
            cp.set_types(_CHUNK_TYPES)
            for d, did, chunks in rows:
                meta = _chunk_meta_base(d)
                tags = meta.get("tags")
                boost = " ".join(str(t) for t in tags) if isinstance(tags, list) else ""
                for ec in chunks:
                    c, cid = ec.chunk, next(chunk_ids)
                    tf = analyzer.counts(
                        c.text, f"{c.header} {boost}".strip(), title_weight, own_heading=_own_heading(c, d)
                    )
                    length = float(sum(tf.values()))
                    lengths += length
                    postings.extend((t, cid, f, length) for t, f in tf.items())
                    cp.write_row(_chunk_row(ns, cid, did, c, meta, length))
                    vectors.append((cid, c.content_hash, ec.embedding))
        _write_postings(cur, ns, postings, df)
        write_vectors(cur, ns.id, _active(ns), ((cid, v) for cid, _, v in vectors))
        for gen, by_hash in extra:
            write_vectors(cur, ns.id, gen, ((cid, by_hash[h]) for cid, h, _ in vectors if h in by_hash))
    return len(vectors), lengths


def _own_heading(c: Chunk, d: Document) -> str:
    """The chunk's own heading, unless it is the document's title again (weighted as a title)."""
    if c.heading_path and c.heading_path[-1].strip().lower() != (d.title or "").strip().lower():
        return c.heading_path[-1]
    return ""


def _chunk_row(ns: Namespace, cid: int, did: int, c: Chunk, meta: dict, length: float) -> tuple:
    """A row of documents/copy_chunks (``_CHUNK_TYPES``)."""
    m = dict(meta, heading_path=list(c.heading_path), page=c.page)
    if c.boxes:  # where the chunk is on its PDF page(s): kbctl show --highlight
        m["boxes"] = [list(b) for b in c.boxes]
    return (
        ns.id, cid, did, c.position, c.text, c.token_count, c.char_start, c.char_end, list(c.heading_path), c.page,
        c.content_hash, Jsonb(m), length,
    )  # fmt: skip


def _active(ns: Namespace) -> Generation:
    """The namespace's active generation, as far as writing its vectors needs it."""
    return Generation(
        ns.generation_id, ns.id, ns.profile_id, ns.profile_name, ns.fingerprint, ns.model, ns.dimension,
        ns.distance, ns.storage, "active",
    )  # fmt: skip


def _check_dimensions(ns: Namespace, items: _Items) -> None:
    """Refuse vectors of another size before touching anything (the schema refuses them too)."""
    for _doc, chunks in items:
        for ec in chunks:
            if len(ec.embedding) != ns.dimension:
                raise ProfileMismatchError(
                    f"a {len(ec.embedding)}-d vector cannot be stored in namespace {ns.name!r}, which is pinned to"
                    f" {ns.profile_name} ({ns.model}, {ns.dimension}-d); nothing was written",
                    hint="embed with the namespace's profile, or ingest into a new namespace",
                )


def _check_analyzer(ns: Namespace, analyzer: Analyzer) -> None:
    """Refuse postings of another analyzer version than the namespace's (its queries would miss them)."""
    if analyzer.version != ns.analyzer:
        raise ProfileMismatchError(
            f"namespace {ns.name!r} holds postings of analyzer version {ns.analyzer}; terms of version"
            f" {analyzer.version} cannot be added to them; nothing was written",
            hint="analyze with the namespace's version: get_analyzer(language, ns.analyzer)",
        )


def set_source_hash(conn: Conn, ns: Namespace, source_uri: str, old: str, new: str) -> int:
    """The documents of ``source_uri`` stored under the source hash ``old`` take ``new``: a source
    written in parts (a feed's entries) is marked whole once its last part is stored."""
    return conn.execute(query("documents/set_source_hash"), (new, ns.id, source_uri, old)).rowcount


def restamp_sources(conn: Conn, ns: Namespace, sources: Sequence[tuple[str, str, str]]) -> int:
    """Each ``(source URI, previous hash, hash)``: the source's documents stored under the previous
    hash take the current one, in one statement (sources whose chunks a new version makes alike)."""
    if not sources:
        return 0
    uris, old, new = (list(c) for c in zip(*sources))
    return conn.execute(query("documents/restamp_sources"), (uris, old, new, ns.id)).rowcount


def keep_documents(conn: Conn, ns: Namespace, rows: Sequence[tuple[int, str, Document, bool]]) -> set[str]:
    """Documents of a changed source that would be written again unchanged keep their rows (chunks,
    postings, vectors, statistics) and take the source's new hash and the fetch facts of its new
    fetch (``Document.fetch_facts``: on the document's row only; its chunks carry none, so none is
    written, but those of a row stored before migration 023, which lose theirs once), inside the
    caller's transaction, under the write lock: ``rows`` are (stored id, new
    source hash, the document as read again, whether its stored ACL is explicit, as the writer read
    it). A row written again since it was read (a new id) or whose ACL changed is not kept. Returns
    the URIs kept; the caller writes the others."""
    if not rows:
        return set()
    write_lock(conn, ns.id, ns.tenant)
    still_active(conn, ns)
    payload = [
        {
            "id": did,
            "source_hash": sh,
            "acl": None if d.acl is None else list(d.acl),
            "explicit": explicit,
            "facts": {k: d.metadata[k] for k in fact_keys(d)},
            "drop": sorted(FETCH_FACTS - set(d.metadata)),  # a fact the old fetch gave and this one did not
        }
        for did, sh, d, explicit in rows
    ]
    params = (json.dumps(payload, default=str), ns.id, ns.id, ns.id)
    return {r[0] for r in conn.execute(query("documents/keep_documents"), params)}


def refresh_facts(conn: Conn, ns: Namespace, sources: Sequence[tuple[str, str, Mapping[str, Any]]]) -> int:
    """Each ``(source URI, source hash, facts)`` of a source skipped because its bytes did not change:
    its documents stored under that hash take ``facts`` (``kbctl.types.REFRESHED_FACTS``, a touched
    file's ``mtime``…) on the keys that are their source's (``documents.fact_keys``), in one
    statement under the write lock; a row whose facts are the same is not written, and no chunk is.
    Returns how many rows were written."""
    if not sources:
        return 0
    payload = [{"uri": u, "source_hash": h, "facts": dict(f)} for u, h, f in sources]
    with conn.transaction():
        write_lock(conn, ns.id, ns.tenant)
        still_active(conn, ns)
        params = (json.dumps(payload, default=str), ns.id, ns.id)
        return conn.execute(query("documents/refresh_facts"), params).rowcount


def delete_documents(conn: Conn, ns: Namespace, uris: Sequence[str]) -> int:
    """Remove documents (and their children, chunks and postings); returns how many went."""
    if not uris:
        return 0
    with conn.transaction():
        write_lock(conn, ns.id, ns.tenant)
        return _delete(conn, ns, list(uris))


def _chunk_meta_base(d: Document) -> dict:
    """What each chunk of ``d`` carries: the document's metadata but its source's fetch facts (they
    change with every changed fetch of a feed, and stay on the document's row, where hits and
    filters read them: ``search/hits``, ``store.filters``), and its uri, title and source type."""
    meta = {k: v for k, v in d.metadata.items() if k not in d.fetch_facts}
    meta.setdefault("source_type", d.source_type)
    meta.setdefault("title", d.title)
    meta["uri"] = d.uri
    return json.loads(json.dumps(meta, default=str))


def _next_ids(conn: Conn, table: str, n: int) -> list[int]:
    if n == 0:
        return []
    rows = conn.execute(query("documents/next_ids"), (f"kbctl.{table}", n)).fetchall()
    return [int(r[0]) for r in rows]


@contextmanager
def _copy_in(cur: Cur, what: str) -> Iterator[Any]:
    """Binary or text COPY of ``what`` (documents, chunks, postings) into the session's stage table,
    then one INSERT from it: PostgreSQL refuses COPY FROM into a table under row-level security."""
    cur.execute(query(f"documents/stage_{what}"))
    with cur.copy(query(f"documents/copy_{what}")) as cp:
        yield cp
    cur.execute(query(f"documents/insert_{what}"))
    cur.execute(query(f"documents/clear_stage_{what}"))


def _write_postings(
    cur: Cur, ns: Namespace, postings: list[tuple[str, int, float, float]], into: Counter[str] | None = None
) -> None:
    with _copy_in(cur, "postings") as cp:
        cp.set_types(["integer", "text", "bigint", "real", "real"])
        for t, cid, f, dl in postings:
            cp.write_row((ns.id, t, cid, f, dl))
    df = Counter(p[0] for p in postings)
    if into is not None:
        into.update(df)
    elif df:
        cur.execute(query("documents/add_vocabulary"), (ns.id, list(df.keys()), list(df.values())))


def _add_vocabulary(conn: Conn, ns: Namespace, df: Counter[str]) -> None:
    """Add ``df`` to the namespace's vocabulary, and empty it."""
    if df:
        conn.execute(query("documents/add_vocabulary"), (ns.id, list(df.keys()), list(df.values())))
        df.clear()


def _add_stats(conn: Conn, ns: Namespace, nchunks: int, length: float) -> None:
    conn.execute(query("documents/add_statistics"), (ns.id, nchunks, length))


def _subtract_vocabulary(conn: Conn, ns: Namespace, ids: list[int]) -> None:
    """Take these documents' terms off the namespace's vocabulary: two statements that each follow
    the documents' terms (a join of the vocabulary with the postings, planned on a young
    namespace's statistics, could read all of it per term). Terms left at 0 stay until
    ``drop_unused_vocabulary``."""
    rows = conn.execute(query("documents/terms_of_documents"), (ns.id, ns.id, ids)).fetchall()
    if rows:
        terms, counts = [r[0] for r in rows], [r[1] for r in rows]
        conn.execute(query("documents/subtract_vocabulary"), (ns.id, terms, counts))


def drop_unused_vocabulary(conn: Conn, ns: Namespace) -> int:
    """Drop the namespace's terms no document holds any more (left at 0 by replacements and
    deletions; readers skip them meanwhile), under the write lock; returns how many went. Run once
    a run's writes are done (``ingest.pipeline``), not per batch: a re-import would otherwise
    delete and insert a term again with every batch."""
    with conn.transaction():
        write_lock(conn, ns.id, ns.tenant)  # the tenant's delete is wholly before or after it
        return conn.execute(query("documents/drop_unused_vocabulary"), (ns.id,)).rowcount


def _delete(conn: Conn, ns: Namespace, uris: list[str]) -> int:
    """Delete documents by URI, with their child documents, inside the caller's transaction."""
    ids = [r[0] for r in conn.execute(query("documents/ids_of_uris"), (ns.id, uris, uris))]
    if not ids:
        return 0
    _subtract_vocabulary(conn, ns, ids)
    n, length = one(conn.execute(query("documents/chunk_totals"), (ns.id, ids)))
    _add_stats(conn, ns, -int(n), -float(length))
    conn.execute(query("documents/delete_documents"), (ns.id, ids))
    return len(ids)
