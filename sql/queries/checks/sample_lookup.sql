-- Sampled chunks looked up exactly, without the HNSW index: each one's distance to its own vector,
-- how many chunks of the generation are strictly nearer to that vector (an exact scan: the bare
-- column, which the index on the cast column cannot serve), how many chunks of the namespace share
-- its content hash but not its vector, and its lexical length next to its postings (summed term
-- frequencies, and postings whose document length disagrees).
-- Template: op the distance operator, col the generation's column (embedding or half).
-- Parameters: generation id, namespace id, chunk ids.
WITH s AS (
    SELECT c.namespace_id, c.id, c.content_hash, c.lex_length, v.generation_id, v.{col} AS vec
    FROM kbctl.chunks c
    JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND v.generation_id = %s
    WHERE c.namespace_id = %s AND c.id = ANY(%s)
)
SELECT s.id,
       s.vec {op} s.vec AS self_distance,
       (SELECT count(*) FROM kbctl.vectors o
         WHERE o.namespace_id = s.namespace_id AND o.generation_id = s.generation_id
           AND o.{col} {op} s.vec < s.vec {op} s.vec) AS nearer,
       (SELECT count(*) FROM kbctl.chunks c JOIN kbctl.vectors o ON o.namespace_id = c.namespace_id AND o.chunk_id = c.id
         WHERE c.namespace_id = s.namespace_id AND c.content_hash = s.content_hash
           AND o.generation_id = s.generation_id AND o.{col} <> s.vec) AS other_vectors,
       s.lex_length,
       (SELECT coalesce(sum(p.tf), 0) FROM kbctl.lexical_postings p
         WHERE p.namespace_id = s.namespace_id AND p.chunk_id = s.id) AS posted,
       (SELECT count(*) FROM kbctl.lexical_postings p
         WHERE p.namespace_id = s.namespace_id AND p.chunk_id = s.id AND p.dl <> s.lex_length) AS bad_lengths
FROM s
