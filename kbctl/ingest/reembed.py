"""A namespace's profile lifecycle: build a shadow generation, swap to it, roll back, drop the old.

``kbctl reembed NS --profile NEW`` (docs/lifecycle.md):

1. ``start_shadow``: a shadow generation of NEW (refused when NEW, with its storage, is what the
   namespace already serves, when another shadow is being built, or when NEW chunks differ);
2. ``build``: every chunk without a vector in the shadow gets one, in batches: from the embed cache
   (a vector NEW made for the same chunk text in any generation of the tenant: going back to a
   profile used before costs no model call; a ``vector`` generation serves a ``halfvec`` one, cast),
   else from NEW's model. Only what is missing is embedded, so a killed build resumes;
3. meanwhile every ingest writes the shadow too (dual writes, ``embedding.DualWrites``), and deletes reach it
   through the chunks' cascade;
4. ``swap``: under the namespace lock (a running ingest finishes first), whatever is still missing
   is filled, then the shadow becomes active and the active one previous, in one transaction;
   ``rollback`` exchanges them back; ``drop_old`` deletes the previous generation.

A search reads the namespace, with its active generation, once: a swap while it runs does not
change what it reads.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import psycopg

from ..chunk import embed_text
from ..config import Profile
from ..errors import ConfigError, NamespaceNotFound, UsageError
from ..store import Namespace, cached_hashes
from ..store import generations as gstore
from ..store.documents import check_present
from ..store.generations import Generation, stored_profile
from ..store.namespaces import ensure_profile, find_profile
from ..store.roles import as_owner
from ..store.runs import namespace_lock, write_lock
from .embedding import Embedding, store_lookup

log = logging.getLogger(__name__)

__all__ = [
    "Generation",
    "ReembedPlan",
    "BuildReport",
    "stored_profile",
    "start_shadow",
    "plan",
    "build",
    "swap",
    "rollback",
    "drop_old",
    "drop_shadow",
    "discard_empty",
    "generation_of",
    "as_generation",
    "describe",
    "check_gates",
]

Progress = Callable[[int, int], None]  # (chunks done, chunks to do)


@dataclass(frozen=True)
class ReembedPlan:
    """What a build would do: chunks without a vector in the target, how many of their texts the
    cache has, how many the model would embed, and the time that takes at the measured speed."""

    namespace: str
    profile: str
    storage: str
    chunks: int
    texts: int
    reused: int
    to_embed: int
    texts_per_second: float | None
    seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BuildReport:
    """What a build did, counting only what it kept: chunks given a vector, texts of theirs the
    model embedded and texts the cache gave; ``discarded``, the chunks whose vector was made (by the
    model or the cache) and thrown away because, before it was written, the chunk was deleted or
    replaced by an ingest or another writer had given it its vector; whether the generation is now
    complete. ``embedded + reused <= chunks`` (a text is counted once however many chunks share it)."""

    namespace: str
    generation: int
    profile: str
    storage: str
    state: str
    chunks: int
    embedded: int
    reused: int
    seconds: float
    complete: bool
    missing: int = 0
    discarded: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def generation_of(conn, ns: Namespace, state: str) -> Generation | None:
    """The namespace's generation in ``state`` (active, shadow or previous), if any."""
    return next((g for g in gstore.generations(conn, ns.id) if g.state == state), None)


def as_generation(ns: Namespace, gen: Generation) -> Namespace:
    """``ns`` as a search of ``gen`` sees it (its profile pin and vectors)."""
    return dataclasses.replace(
        ns,
        profile_id=gen.profile_id,
        profile_name=gen.profile_name,
        fingerprint=gen.fingerprint,
        model=gen.model,
        dimension=gen.dimension,
        distance=gen.distance,
        generation_id=gen.id,
        storage=gen.storage,
    )


def start_shadow(conn, ns: Namespace, profile: Profile, storage: str, active: Profile | None) -> Generation:
    """The shadow generation of ``profile`` stored as ``storage``: created, or the one a killed
    build left (resumed). Refused as ``check_shadow`` says."""
    shadow = check_shadow(conn, ns, profile, storage, active)
    if shadow is not None:
        return shadow
    with as_owner(conn):
        pid = ensure_profile(conn, profile)
    try:
        with conn.transaction():
            gid = gstore.create_generation(conn, ns.id, pid, profile, storage, "shadow", index=False)
    except psycopg.errors.ForeignKeyViolation:
        _present(conn, ns)  # the namespace went meanwhile
        raise
    return next(g for g in gstore.generations(conn, ns.id) if g.id == gid)


def check_shadow(conn, ns: Namespace, profile: Profile, storage: str, active: Profile | None) -> Generation | None:
    """The shadow of ``profile`` stored as ``storage`` a killed build left (None: none yet), or a
    ``UsageError``: when it is what the namespace serves, when another shadow is being built, or when
    ``profile`` chunks differently from ``active`` (re-chunking is not built yet). A plan is refused
    as its build would be."""
    gens = _by_state(conn, ns)
    cur = gens["active"]
    if cur.fingerprint == profile.fingerprint and cur.storage == storage:
        raise UsageError(
            f"namespace {ns.name!r} already serves profile {profile.name!r} ({profile.fingerprint}) as {storage}",
            hint="pick another profile, or another --storage",
        )
    shadow = gens.get("shadow")
    if shadow is not None:
        if shadow.fingerprint == profile.fingerprint and shadow.storage == storage:
            return shadow
        raise UsageError(
            f"namespace {ns.name!r} has a shadow generation of profile {shadow.profile_name!r} ({shadow.storage})"
            " being built",
            hint=f"finish it (kbctl reembed {ns.name} --swap) or drop it (kbctl reembed {ns.name} --drop-shadow)",
        )
    if active is not None and (profile.chunk != active.chunk or profile.max_tokens < active.max_tokens):
        raise UsageError(
            f"profile {profile.name!r} chunks differently from {active.name!r} (chunk settings or max_tokens);"
            " re-embedding with re-chunking is not supported yet",
            hint=f"give {profile.name!r} the [chunk] settings of {active.name!r}, or ingest into a new namespace",
        )
    return None


def plan(conn, ns: Namespace, gen_profile: Profile, storage: str, *, measure: bool = True) -> ReembedPlan:
    """What building a generation of ``gen_profile`` (the shadow, or a new one) would do."""
    shadow = generation_of(conn, ns, "shadow")
    target = shadow if shadow and shadow.fingerprint == gen_profile.fingerprint and shadow.storage == storage else None
    probe = _probe(ns, gen_profile, storage, target)
    n, texts = gstore.missing_count(conn, ns.id, probe.id) if target else _chunk_totals(conn, ns)
    reused = _cached_count(conn, ns, probe, target)
    to_embed = max(texts - reused, 0)
    speed = _speed(conn, ns, gen_profile) if measure and to_embed else None
    return ReembedPlan(
        ns.name,
        gen_profile.name,
        storage,
        n,
        texts,
        reused,
        to_embed,
        None if speed is None else round(speed, 1),
        None if not to_embed else (round(to_embed / speed, 1) if speed else None),
    )


def _probe(ns: Namespace, profile: Profile, storage: str, target: Generation | None) -> Generation:
    """The generation to look the cache up for: the shadow, or one not created yet."""
    if target is not None:
        return target
    return Generation(-1, ns.id, -1, profile.name, profile.fingerprint, profile.model, profile.dimension,
                      profile.distance, storage, "shadow")  # fmt: skip


def _chunk_totals(conn, ns: Namespace) -> tuple[int, int]:
    return gstore.missing_count(conn, ns.id, -1)  # no generation -1: every chunk is missing from it


def _cached_count(conn, ns: Namespace, probe: Generation, target: Generation | None) -> int:
    """How many distinct missing texts the embed cache holds a vector of the profile for."""
    if probe.profile_id < 0:
        pid = find_profile(conn, probe.fingerprint)
        if pid is None:
            return 0
        probe = dataclasses.replace(probe, profile_id=pid)
    gid = target.id if target else -1
    hits, after = 0, 0
    while rows := gstore.missing_chunks(conn, ns.id, gid, after, 5000):
        hits += len(cached_hashes(conn, ns, {r[1] for r in rows}, generation=probe))  # no vector read
        after = rows[-1][0]
    return hits


def _speed(conn, ns: Namespace, profile: Profile) -> float | None:
    """Texts a second the model embeds here, measured on a few of the namespace's chunks (after one
    warm-up call, so the model's load is not counted)."""
    from ..embed import get_embedder

    rows = gstore.missing_chunks(conn, ns.id, -1, 0, 32)
    if not rows:
        return None
    texts = [embed_text(r[2], r[4], r[3], r[1]) for r in rows]
    emb = get_embedder(profile)
    emb.embed_documents(texts[:2])
    t0 = time.perf_counter()
    emb.embed_documents(texts)
    return len(texts) / max(time.perf_counter() - t0, 1e-6)


def build(
    conn,
    ns: Namespace,
    gen: Generation,
    profile: Profile,
    *,
    batch: int = 256,
    progress: Progress | None = None,
) -> BuildReport:
    """Give every chunk of ``ns`` without a vector in ``gen`` one (cache first, then ``profile``'s
    model), batch by batch, each batch committed: a killed build loses at most one batch. Passes
    repeat until one finds nothing missing (chunks an ingest wrote meanwhile without dual writes).
    The generation's HNSW index is built then, if it has none (a shadow's is built after its
    vectors)."""
    if profile.fingerprint != gen.fingerprint:
        raise ConfigError(f"profile {profile.name!r} is not the profile of generation {gen.id}")
    t0 = time.perf_counter()
    total, _ = gstore.missing_count(conn, ns.id, gen.id)
    done = embedded = reused = discarded = 0
    emb = Embedding(profile, store_lookup(conn, ns, gen))
    if progress:
        progress(0, total)
    while True:
        after, found = 0, 0
        while rows := gstore.missing_chunks(conn, ns.id, gen.id, after, batch):
            after, found = rows[-1][0], found + len(rows)
            texts = {r[1]: embed_text(r[2], r[4], r[3], r[1]) for r in rows}
            vectors = emb.cached(texts)
            fresh = {h: t for h, t in texts.items() if h not in vectors}
            if fresh:
                vectors.update(emb.embed(fresh))
            kept = _store(conn, ns, gen, [(r[0], vectors[r[1]]) for r in rows])
            kept_texts = {r[1] for r in rows if r[0] in kept}
            done, discarded = done + len(kept), discarded + len(rows) - len(kept)
            embedded += len(kept_texts & fresh.keys())
            reused += len(kept_texts - fresh.keys())
            if progress:
                progress(done, max(total, done))
        if not found:
            break
    _present(conn, ns)  # a namespace deleted under the build has no chunks left to miss a vector
    left, _ = gstore.missing_count(conn, ns.id, gen.id)
    if not left and gstore.ensure_index(conn, gen, profile):
        try:
            _present(conn, ns)  # deleted while the index was built: its delete dropped no index yet
        except NamespaceNotFound:
            gstore.drop_generation_indexes(conn, [gen.id])
            raise
    if discarded:
        log.info("%d vector(s) discarded: their chunk went or got its vector meanwhile", discarded)
    return BuildReport(
        ns.name, gen.id, gen.profile_name, gen.storage, gen.state, done, embedded, reused,
        round(time.perf_counter() - t0, 3), left == 0, left, discarded,
    )  # fmt: skip


def _by_state(conn, ns: Namespace) -> dict[str, Generation]:
    """The namespace's generations by state (``active``, ``shadow``, ``previous``); a namespace
    without an active one was deleted since the caller read it, and is refused as ``_present`` does."""
    gens = {g.state: g for g in gstore.generations(conn, ns.id)}
    if "active" not in gens:  # every namespace has one
        _present(conn, ns)
    return gens


def _present(conn, ns: Namespace) -> None:
    """Refuse a build whose namespace was deleted under it (``kbctl namespaces delete``, or its
    tenant's delete) in one line that says so: a ``NamespaceNotFound`` (or ``TenantNotFound``)."""
    check_present(conn, ns, "reembed")


_WRITE_TRIES = 3
"""Times a batch is written while chunks of it are deleted under its write (each time without them)."""


def _store(conn, ns: Namespace, gen: Generation, rows: list[tuple[int, Any]]) -> set[int]:
    """Write one batch in its own transaction; the ids of the chunks given their vector. A chunk
    deleted (or replaced by an ingest) since it was read, or given its vector by another writer, is
    skipped. One deleted by a transaction that commits while the write waits for it fails the
    batch's foreign key: the batch is written again, which skips it (after ``_WRITE_TRIES`` such
    failures, nothing is kept and the next pass reads the chunks again)."""
    for _ in range(_WRITE_TRIES):
        try:
            with conn.transaction(), conn.cursor() as cur:
                return gstore.write_vectors(cur, ns.id, gen, rows)
        except psycopg.errors.ForeignKeyViolation:
            if gen.id not in gstore.generation_ids(conn, ns.id):  # not a chunk: the generation itself went
                _present(conn, ns)  # with its namespace?
                raise UsageError(
                    f"the {gen.profile_name} generation of namespace {ns.name!r} was dropped while it was being built",
                    hint=f"start it again: kbctl reembed {ns.name} --profile {gen.profile_name}",
                ) from None
            log.info("a chunk of the batch went while it was written; writing the batch again without it")
    return set()


def swap(conn, ns: Namespace, like: Profile, *, progress: Progress | None = None) -> dict[str, Any]:
    """Make the shadow active, in one transaction, under the namespace lock (a running ingest
    finishes first; then what it wrote without dual writes is filled in). The active generation
    becomes the previous one (an older previous one is deleted)."""
    with namespace_lock(conn, ns):
        gens = _by_state(conn, ns)
        shadow = gens.get("shadow")
        if shadow is None:
            raise UsageError(
                f"namespace {ns.name!r} has no shadow generation to swap to",
                hint=f"build one first: kbctl reembed {ns.name} --profile NAME",
            )
        old = gens.get("previous")
        filled = _flip(conn, ns, shadow, gens["active"], like, progress, delete=old)
    if old is not None:  # after the lock: the drop waits for queries on vectors, ingests need not
        gstore.drop_generation_indexes(conn, [old.id])
    return {
        "namespace": ns.name,
        "active": shadow.id,
        "previous": gens["active"].id,
        "dropped": old.id if old else None,
        "filled": filled,
    }


def rollback(conn, ns: Namespace, like: Profile, *, progress: Progress | None = None) -> dict[str, Any]:
    """Make the previous generation active again (and the active one previous), under the lock,
    after filling in what it lacks (dual writes keep it whole while it is kept)."""
    with namespace_lock(conn, ns):
        gens = _by_state(conn, ns)
        prev = gens.get("previous")
        if prev is None:
            raise UsageError(
                f"namespace {ns.name!r} has no previous generation to roll back to",
                hint="a swap keeps the generation it replaced until --drop-old",
            )
        filled = _flip(conn, ns, prev, gens["active"], like, progress)
    return {"namespace": ns.name, "active": prev.id, "previous": gens["active"].id, "filled": filled}


def _flip(
    conn, ns: Namespace, gen: Generation, active: Generation, like: Profile, progress: Progress | None,
    delete: Generation | None = None,
) -> int:  # fmt: skip
    """Fill ``gen`` and make it active (``active`` becomes previous, ``delete`` is deleted), in one
    transaction under the write lock, filling again while a batch slipped in without its vectors;
    the chunks filled. The caller holds the namespace lock."""
    filled = 0
    while True:
        filled += build(conn, ns, gen, stored_profile(conn, gen.profile_id, like), progress=progress).chunks
        with conn.transaction():
            if not _whole(conn, ns, gen):
                continue
            if delete is not None:
                gstore.delete_generation(conn, ns.id, delete.id)
            gstore.set_states(conn, ns.id, [(active.id, "previous"), (gen.id, "active")])
            gstore.pin_namespace(conn, ns.id, gen)
        return filled


def _whole(conn, ns: Namespace, gen: Generation) -> bool:
    """Inside the flip's transaction: take the namespace's write lock (writers without the ingest
    lock, a dead run's workers, take turns with it) and say whether ``gen`` has every chunk's
    vector. A batch written after the last fill without ``gen``'s vectors (its dual writes read the
    generations before ``gen`` existed) makes the caller fill again; a batch written after the flip
    is refused by ``store.documents.still_active``."""
    write_lock(conn, ns.id, ns.tenant)
    left, _ = gstore.missing_count(conn, ns.id, gen.id)
    if left:
        log.info(
            "%d chunk(s) of namespace %r arrived without generation %d's vectors; filling them", left, ns.name, gen.id
        )
    return not left


def drop_old(conn, ns: Namespace) -> dict[str, Any]:
    """Delete the previous generation (its vectors and index): no rollback afterwards."""
    return _drop(conn, ns, "previous", "--drop-old")


def drop_shadow(conn, ns: Namespace) -> dict[str, Any]:
    """Delete the shadow generation being built (its vectors and index)."""
    return _drop(conn, ns, "shadow", "--drop-shadow")


def _drop(conn, ns: Namespace, state: str, flag: str) -> dict[str, Any]:
    with namespace_lock(conn, ns):  # an ingest's dual writes never meet a generation going away
        gen = generation_of(conn, ns, state)
        if gen is None:
            made = "a --swap keeps the generation it replaces" if state == "previous" else "--profile NAME builds one"
            raise UsageError(
                f"namespace {ns.name!r} has no {state} generation ({flag} has nothing to drop)",
                hint=f"see its generations: kbctl reembed {ns.name} --status ({made})",
            )
        with conn.transaction():
            gstore.delete_generation(conn, ns.id, gen.id)
    # after the lock: a concurrent drop waits for the queries on vectors (and for any index build
    # there) already running, and the namespace's ingests need not wait with it
    gstore.drop_generation_indexes(conn, [gen.id])
    return {"namespace": ns.name, "dropped": gen.id, "state": state}


def discard_empty(conn, ns: Namespace, gen: Generation) -> bool:
    """Delete ``gen``, the shadow a failed build made, when no vector was written to it (its model
    failed before the first batch was stored), so the failure leaves nothing behind and another
    profile's build is not refused for it; whether it did. A shadow holding vectors stays, for the
    next build to resume, and so does one whose namespace an ingest holds (its dual writes may be
    filling it). A failure here is logged: it must not hide the build's."""
    try:
        if conn.closed:
            return False
        with namespace_lock(conn, ns, wait=False), conn.transaction():
            gone = gstore.delete_empty_shadow(conn, ns.id, gen.id)
        if gone:
            gstore.drop_generation_indexes(conn, [gen.id])
            log.info("dropped the empty shadow generation %d its failed build made", gen.id)
        return gone
    except Exception as e:
        log.info("kept the shadow generation %d of the failed build: %s", gen.id, e)
        return False


def describe(conn, ns: Namespace) -> list[dict[str, Any]]:
    """The namespace's generations with their profile, storage, state, vectors and bytes on disk."""
    sizes = gstore.generation_sizes(conn, ns.id)
    out = []
    for g in gstore.generations(conn, ns.id):
        s = sizes.get(g.id, {})
        out.append(
            {
                "id": g.id,
                "state": g.state,
                "profile": g.profile_name,
                "model": g.model,
                "fingerprint": g.fingerprint,
                "dimension": g.dimension,
                "storage": g.storage,
                "vectors": s.get("vectors", 0),
                "bytes": s.get("vector_bytes", 0) + s.get("index_bytes", 0),
                "vector_bytes": s.get("vector_bytes", 0),
                "index_bytes": s.get("index_bytes", 0),
                "created_at": g.created_at.isoformat() if g.created_at else None,
                "activated_at": g.activated_at.isoformat() if g.activated_at else None,
            }
        )
    return out


_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_GATE = re.compile(rf"^(?:(\w+):)?([\w@.]+)\s*>=\s*(active|{_NUMBER})(?:\s*-\s*({_NUMBER}))?$")


def read_gate(gate: str) -> re.Match[str]:
    """A gate as ``check_gates`` reads it; one it cannot read is a ``UsageError`` (asked before
    the eval it is checked on runs)."""
    m = _GATE.match(gate.strip())
    if not m:
        raise UsageError(f"cannot read the gate {gate!r}", hint="write MODE:METRIC>=active or MODE:METRIC>=0.5")
    return m


def check_gates(side: dict[str, Any], gates: Iterable[str]) -> list[str]:
    """The gates of a swap that fail on a side-by-side eval (``compare_generations``): each reads
    ``[MODE:]METRIC>=active`` (the shadow at least as good as the active generation, optionally
    ``>=active-0.01``) or ``[MODE:]METRIC>=NUMBER``; the mode defaults to hybrid."""
    failed = []
    for g in gates:
        m = read_gate(g)
        mode, metric, bound, slack = m.group(1) or "hybrid", m.group(2), m.group(3), float(m.group(4) or 0)
        try:
            new = side["shadow"]["modes"][mode][metric]
            floor = side["active"]["modes"][mode][metric] - slack if bound == "active" else float(bound)
        except KeyError:
            raise UsageError(f"gate {g!r}: the eval has no {mode}:{metric}") from None
        if new < floor:
            failed.append(f"{mode}:{metric} of the shadow {new:.4f} < {floor:.4f} ({g})")
    return failed
