-- Pack a namespace's postings with chunk ids in (lo, hi] into one segment: each term's postings
-- ordered by impact (BM25's term weight under the namespace's statistics of the time, then chunk
-- id) and cut every `block` postings into kbctl.lexical_blocks, and each term's directory (its
-- blocks' sizes, largest tf and smallest dl, in block order) into kbctl.lexical_terms.
-- Parameters: block, namespace id, lo, hi, k1, b, avgdl, namespace id, segment, namespace id,
-- segment. Returns the postings packed.
WITH packed AS MATERIALIZED (
    SELECT term, (rn / %s)::int AS block, count(*)::int AS n, max(tf) AS max_tf, min(dl) AS min_dl,
           string_agg(int8send(chunk_id), ''::bytea ORDER BY rn) AS chunk_ids,
           string_agg(float4send(tf), ''::bytea ORDER BY rn) AS tfs,
           string_agg(float4send(dl), ''::bytea ORDER BY rn) AS dls
    FROM (
        SELECT term, chunk_id, tf, dl,
               row_number() OVER (PARTITION BY term ORDER BY impact DESC, chunk_id) - 1 AS rn
        FROM (
            SELECT term, chunk_id, tf, dl, tf / (tf + k.k1 * (1 - k.b + k.b * dl / k.avgdl)) AS impact
            FROM kbctl.lexical_postings,
                 (SELECT %s::int AS ns, %s::bigint AS lo, %s::bigint AS hi,
                         %s::float8 AS k1, %s::float8 AS b, %s::float8 AS avgdl) AS k
            WHERE namespace_id = k.ns AND chunk_id > k.lo AND chunk_id <= k.hi
        ) i
    ) p
    GROUP BY term, block
), blocks AS (
    INSERT INTO kbctl.lexical_blocks (namespace_id, term, segment, block, chunk_ids, tfs, dls)
    SELECT %s, term, %s, block, chunk_ids, tfs, dls FROM packed
), terms AS (
    INSERT INTO kbctl.lexical_terms (namespace_id, term, segment, sizes, max_tfs, min_dls)
    SELECT %s, term, %s,
           string_agg(int4send(n), ''::bytea ORDER BY block),
           string_agg(float4send(max_tf), ''::bytea ORDER BY block),
           string_agg(float4send(min_dl), ''::bytea ORDER BY block)
    FROM packed GROUP BY term
)
SELECT coalesce(sum(n), 0)::bigint FROM packed
