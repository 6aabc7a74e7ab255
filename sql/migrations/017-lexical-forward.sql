-- A forward index of each packed segment (kbctl.lexical_segments, migration 016): for every chunk,
-- by ordinal, the terms it holds and their tf. Pseudo-relevance feedback at a bounded cost
-- (prf = "rescore", kbctl.search.engine) scores the first round's candidates with the expanded
-- query; from the postings table that reads each candidate's postings from the heap (about 3 ms for
-- 200 candidates at 100k chunks, 50 ms at a million), from these arrays it is a gather in memory.
--
-- One row per segment, written by the packing next to kbctl.lexical_docs and kbctl.lexical_terms
-- (sql/queries/lexical/pack_arrays.sql), never rewritten (a repack writes a new segment):
-- - terms: the segment's dictionary; a term's id is its index, 0-based, in term order;
-- - offsets: int4 per ordinal, plus one: ordinal o's entries are [offsets[o], offsets[o+1]);
-- - term_ids (int4) and tfs (float4, the postings' own values): the entries, by ordinal then term id.
-- Big-endian (int4send, float4send), out of line and uncompressed (EXTERNAL): a row is read whole.
--
-- Segments packed before this migration have no row: rescoring reads their candidates' postings,
-- as it does for the unpacked tail, until the next repack (`kbctl db optimize`) writes one.
CREATE TABLE kbctl.lexical_forward (
    namespace_id integer NOT NULL,
    segment      integer NOT NULL,
    terms        text[]  NOT NULL,
    offsets      bytea   NOT NULL,
    term_ids     bytea   NOT NULL,
    tfs          bytea   NOT NULL,
    PRIMARY KEY (namespace_id, segment),
    FOREIGN KEY (namespace_id, segment) REFERENCES kbctl.lexical_segments (namespace_id, segment) ON DELETE CASCADE
);
ALTER TABLE kbctl.lexical_forward ALTER COLUMN terms SET STORAGE EXTERNAL;
ALTER TABLE kbctl.lexical_forward ALTER COLUMN offsets SET STORAGE EXTERNAL;
ALTER TABLE kbctl.lexical_forward ALTER COLUMN term_ids SET STORAGE EXTERNAL;
ALTER TABLE kbctl.lexical_forward ALTER COLUMN tfs SET STORAGE EXTERNAL;

ALTER TABLE kbctl.lexical_forward ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_forward FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_forward USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.lexical_forward TO kbctl_tenant;
