-- Packed postings as arrays scored whole (kbctl.search.termarrays), instead of impact-ordered
-- blocks pruned by their bounds (migration 014). Measured at a million chunks: the queries the lane
-- serves (8 to 16 common terms, depth 100) kept every term's bound high, so block-max read 70-75 %
-- of their postings anyway, in rounds, with bookkeeping that cost more than the scoring; reading
-- every posting of the query's terms as a few compact arrays and adding them up with numpy is
-- several times faster and has nothing to prune (docs/benchmarks.md, "Lexical lane").
--
-- A segment (kbctl.lexical_segments, unchanged: chunk ids in (lo, hi], written under the
-- namespace's ingest lock) numbers the chunks it packs 0..n-1 in chunk id order (their ordinals):
-- - kbctl.lexical_docs, one row per segment: the chunk id (int8) and the length dl (float4) of each
--   ordinal. The lane keeps it in memory per segment (a segment is never rewritten: a repack
--   writes a new one under a new number).
-- - kbctl.lexical_terms, one row per term and segment: the ordinals of the chunks holding the term
--   (int4, ascending) and their tf, one byte each when every tf of the row is a whole number up to
--   255, else float4 (title and heading weights make fractions; the lengths tell them apart); and
--   the row's largest tf and smallest dl, from which the lane computes, with the statistics of now,
--   a bound no posting of the term exceeds (BM25's term weight rises with tf and falls with dl).
-- Big-endian (int4send, float4send, int8send); tf and dl are the postings' own `real` values, so
-- the scores are the same numbers as the exhaustive statement's. Out of line and uncompressed
-- (EXTERNAL): a row is read whole, and compression would cost more to undo than it saves to read.
--
-- The packed rows are derived (kbctl.lexical_postings is the record), so the old ones are dropped
-- rather than converted: the lexical lane scores a namespace's postings until it is packed again,
-- at the end of its next ingest (a namespace without segments is all tail) or by `kbctl db optimize`.
DELETE FROM kbctl.lexical_segments;
DROP TABLE kbctl.lexical_blocks;
DROP TABLE kbctl.lexical_terms;

CREATE TABLE kbctl.lexical_docs (
    namespace_id integer NOT NULL,
    segment      integer NOT NULL,
    chunk_ids    bytea   NOT NULL,
    dls          bytea   NOT NULL,
    PRIMARY KEY (namespace_id, segment),
    FOREIGN KEY (namespace_id, segment) REFERENCES kbctl.lexical_segments (namespace_id, segment) ON DELETE CASCADE
);
ALTER TABLE kbctl.lexical_docs ALTER COLUMN chunk_ids SET STORAGE EXTERNAL;
ALTER TABLE kbctl.lexical_docs ALTER COLUMN dls SET STORAGE EXTERNAL;

CREATE TABLE kbctl.lexical_terms (
    namespace_id integer NOT NULL,
    term         text    NOT NULL,
    segment      integer NOT NULL,
    ords         bytea   NOT NULL,
    tfs          bytea   NOT NULL,
    max_tf       real    NOT NULL,
    min_dl       real    NOT NULL,
    PRIMARY KEY (namespace_id, term, segment),
    FOREIGN KEY (namespace_id, segment) REFERENCES kbctl.lexical_segments (namespace_id, segment) ON DELETE CASCADE
);
ALTER TABLE kbctl.lexical_terms ALTER COLUMN ords SET STORAGE EXTERNAL;
ALTER TABLE kbctl.lexical_terms ALTER COLUMN tfs SET STORAGE EXTERNAL;

ALTER TABLE kbctl.lexical_docs ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_docs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_docs USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.lexical_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_terms USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.lexical_docs, kbctl.lexical_terms TO kbctl_tenant;
