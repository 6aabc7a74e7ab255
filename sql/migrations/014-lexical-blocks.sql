-- Packed postings for the lexical lane (kbctl.search.blockmax): a namespace's postings, once
-- packed, are read as compact blocks with their bounds instead of one index entry per posting.
--
-- A segment covers the namespace's chunks with ids in (lo, hi]: chunk ids only grow (a sequence)
-- and a segment is written under the namespace's ingest lock, so every chunk of the range that
-- exists is in it. Chunks above the newest segment's hi (the tail) are scored from
-- kbctl.lexical_postings as before. A packed chunk that was deleted since (a replaced document) is
-- a tombstone by absence: its postings rows are gone, so the lane drops it when it checks its
-- candidates; `kbctl db optimize` repacks a namespace into one segment without them.
--
-- A term's postings in a segment are ordered by impact (BM25 term weight under the statistics of
-- the time) and cut into blocks of a few hundred; each block keeps its largest tf and smallest dl,
-- from which the lane computes, with the current avgdl, a bound no posting of the block exceeds.
-- The arrays are big-endian (int8send/float4send): chunk ids int64, tf and dl float4 (the postings'
-- own `real` values, so scores are the same numbers as the exhaustive statement's).
CREATE TABLE kbctl.lexical_segments (
    namespace_id integer     NOT NULL REFERENCES kbctl.namespaces (id) ON DELETE CASCADE,
    segment      integer     NOT NULL,
    lo           bigint      NOT NULL,  -- exclusive
    hi           bigint      NOT NULL,  -- inclusive
    chunks       bigint      NOT NULL,
    postings     bigint      NOT NULL,
    built_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, segment)
);

-- One row per (term, segment): its blocks' sizes and bounds, so the lane reads a term's directory
-- in one row whatever its document frequency.
CREATE TABLE kbctl.lexical_terms (
    namespace_id integer NOT NULL,
    term         text    NOT NULL,
    segment      integer NOT NULL,
    sizes        bytea   NOT NULL,  -- int4 per block
    max_tfs      bytea   NOT NULL,  -- float4 per block
    min_dls      bytea   NOT NULL,  -- float4 per block
    PRIMARY KEY (namespace_id, term, segment),
    FOREIGN KEY (namespace_id, segment) REFERENCES kbctl.lexical_segments (namespace_id, segment) ON DELETE CASCADE
);

CREATE TABLE kbctl.lexical_blocks (
    namespace_id integer NOT NULL,
    term         text    NOT NULL,
    segment      integer NOT NULL,
    block        integer NOT NULL,
    chunk_ids    bytea   NOT NULL,
    tfs          bytea   NOT NULL,
    dls          bytea   NOT NULL,
    PRIMARY KEY (namespace_id, term, segment, block),
    FOREIGN KEY (namespace_id, segment) REFERENCES kbctl.lexical_segments (namespace_id, segment) ON DELETE CASCADE
) WITH (toast_tuple_target = 8160);
-- A block (4 KB at 256 postings) stays inline and uncompressed: read in one page, decoded by numpy.
ALTER TABLE kbctl.lexical_blocks ALTER COLUMN chunk_ids SET STORAGE MAIN;
ALTER TABLE kbctl.lexical_blocks ALTER COLUMN tfs SET STORAGE MAIN;
ALTER TABLE kbctl.lexical_blocks ALTER COLUMN dls SET STORAGE MAIN;
ALTER TABLE kbctl.lexical_terms SET (toast_tuple_target = 8160);

ALTER TABLE kbctl.lexical_segments ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_segments FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_segments USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.lexical_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_terms USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.lexical_blocks ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_blocks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_blocks USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.lexical_segments, kbctl.lexical_terms, kbctl.lexical_blocks TO kbctl_tenant;
