-- Sampled chunks looked up exactly, without the HNSW index: each one's distance to its own vector,
-- how many chunks of the generation are strictly nearer to that vector (an exact scan: the bare
-- column, which the index on the cast column cannot serve), how many chunks of the namespace share
-- its content hash but not its vector, and its lexical length next to its postings (summed term
-- frequencies, and postings whose document length disagrees).
-- Each chunk's vector is read by its whole key, in a LATERAL subquery kept apart (OFFSET 0): right
-- after a bulk ingest the planner's statistics say the tables are empty, and a join it was free to
-- plan scanned the whole generation once per chunk sharing the sample's hash (n² on a corpus of
-- repeated texts: seconds a sample).
-- Template: op the distance operator, col the generation's column (embedding or half).
-- Parameters: generation id, namespace id, chunk ids.
WITH s AS (
    SELECT c.namespace_id, c.id, c.content_hash, c.lex_length, v.generation_id, v.vec
    FROM kbctl.chunks c
    CROSS JOIN LATERAL (
        SELECT o.generation_id, o.{col} AS vec FROM kbctl.vectors o
        WHERE o.namespace_id = c.namespace_id AND o.chunk_id = c.id AND o.generation_id = %s
        OFFSET 0
    ) v
    WHERE c.namespace_id = %s AND c.id = ANY(%s)
)
SELECT s.id,
       s.vec {op} s.vec AS self_distance,
       (SELECT count(*) FROM kbctl.vectors o
         WHERE o.namespace_id = s.namespace_id AND o.generation_id = s.generation_id
           AND o.{col} {op} s.vec < s.vec {op} s.vec) AS nearer,
       (SELECT count(*) FROM kbctl.chunks c
         CROSS JOIN LATERAL (
             SELECT 1 FROM kbctl.vectors o
             WHERE o.namespace_id = c.namespace_id AND o.chunk_id = c.id AND o.generation_id = s.generation_id
               AND o.{col} <> s.vec
             OFFSET 0
         ) o
         WHERE c.namespace_id = s.namespace_id AND c.content_hash = s.content_hash) AS other_vectors,
       s.lex_length,
       (SELECT coalesce(sum(p.tf), 0) FROM kbctl.lexical_postings p
         WHERE p.namespace_id = s.namespace_id AND p.chunk_id = s.id) AS posted,
       (SELECT count(*) FROM kbctl.lexical_postings p
         WHERE p.namespace_id = s.namespace_id AND p.chunk_id = s.id AND p.dl <> s.lex_length) AS bad_lengths
FROM s
