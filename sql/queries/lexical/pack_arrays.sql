-- Pack a namespace's postings with chunk ids in (lo, hi] into one segment: its chunks numbered
-- 0..n-1 in chunk id order (kbctl.lexical_docs: their ids and lengths) and each term's ordinals
-- and tfs (kbctl.lexical_terms; tf one byte each when every tf of the term is a whole number up to
-- 255, else float4), with its largest tf and smallest dl; and the segment's forward index
-- (kbctl.lexical_forward: each ordinal's term ids and tfs, migration 017). Parameters: namespace id, lo, hi, segment. Returns the postings packed.
WITH k AS (
    SELECT %s::int AS ns, %s::bigint AS lo, %s::bigint AS hi, %s::int AS seg
), d AS MATERIALIZED (
    SELECT p.chunk_id, max(p.dl) AS dl, (row_number() OVER (ORDER BY p.chunk_id) - 1)::int AS ord
    FROM kbctl.lexical_postings p, k
    WHERE p.namespace_id = k.ns AND p.chunk_id > k.lo AND p.chunk_id <= k.hi
    GROUP BY p.chunk_id
), docs AS (
    INSERT INTO kbctl.lexical_docs (namespace_id, segment, chunk_ids, dls)
    SELECT k.ns, k.seg, string_agg(int8send(d.chunk_id), ''::bytea ORDER BY d.ord),
           string_agg(float4send(d.dl), ''::bytea ORDER BY d.ord)
    FROM d, k
    GROUP BY k.ns, k.seg
), terms AS (
    INSERT INTO kbctl.lexical_terms (namespace_id, term, segment, ords, tfs, max_tf, min_dl)
    SELECT k.ns, p.term, k.seg, string_agg(int4send(d.ord), ''::bytea ORDER BY d.ord),
           CASE WHEN bool_and(p.tf = trunc(p.tf) AND p.tf BETWEEN 0 AND 255)
                THEN string_agg(substring(int4send(p.tf::int) FROM 4 FOR 1), ''::bytea ORDER BY d.ord)
                ELSE string_agg(float4send(p.tf), ''::bytea ORDER BY d.ord) END,
           max(p.tf), min(d.dl)
    FROM kbctl.lexical_postings p JOIN d ON d.chunk_id = p.chunk_id, k
    WHERE p.namespace_id = k.ns AND p.chunk_id > k.lo AND p.chunk_id <= k.hi
    GROUP BY k.ns, k.seg, p.term
    RETURNING term, length(ords) / 4 AS n
), dict AS MATERIALIZED (
    -- the segment's dictionary (migration 017): a term's id is its rank in term order, from 0 (the
    -- terms just packed, so the postings are not read a third time for them)
    SELECT terms.term, (row_number() OVER (ORDER BY terms.term) - 1)::int AS tid FROM terms
), fp AS MATERIALIZED (
    SELECT d.ord, dict.tid, p.tf
    FROM kbctl.lexical_postings p JOIN d ON d.chunk_id = p.chunk_id JOIN dict ON dict.term = p.term, k
    WHERE p.namespace_id = k.ns AND p.chunk_id > k.lo AND p.chunk_id <= k.hi
), ends AS (
    SELECT c.ord, (sum(c.n) OVER (ORDER BY c.ord))::int AS e
    FROM (SELECT fp.ord, count(*) AS n FROM fp GROUP BY fp.ord) c
), entries AS (
    -- both arrays in one ordered pass (aggregates with the same ORDER BY share one sort)
    SELECT string_agg(int4send(fp.tid), ''::bytea ORDER BY fp.ord, fp.tid) AS tids,
           string_agg(float4send(fp.tf), ''::bytea ORDER BY fp.ord, fp.tid) AS tfs
    FROM fp
), forward AS (
    INSERT INTO kbctl.lexical_forward (namespace_id, segment, terms, offsets, term_ids, tfs)
    SELECT k.ns, k.seg,
           (SELECT array_agg(dict.term ORDER BY dict.tid) FROM dict),
           int4send(0) || (SELECT string_agg(int4send(ends.e), ''::bytea ORDER BY ends.ord) FROM ends),
           entries.tids, entries.tfs
    FROM k, entries
    WHERE entries.tids IS NOT NULL
)
SELECT coalesce(sum(n), 0)::bigint FROM terms
