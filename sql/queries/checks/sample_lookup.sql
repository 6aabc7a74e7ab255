-- Sampled chunks looked up exactly, without the HNSW index: each one's distance to its own vector,
-- how many chunks of the namespace are strictly nearer to that vector (an exact scan: the bare
-- column, which the index on embedding::vector(d) cannot serve), how many chunks of the namespace
-- share its content hash but not its vector, and its lexical length next to its postings (summed
-- term frequencies, and postings whose document length disagrees).
-- Template: op the distance operator. Parameters: namespace id, chunk ids.
SELECT s.id,
       s.embedding {op} s.embedding AS self_distance,
       (SELECT count(*) FROM kbctl.chunks c
         WHERE c.namespace_id = s.namespace_id
           AND c.embedding {op} s.embedding < s.embedding {op} s.embedding) AS nearer,
       (SELECT count(*) FROM kbctl.chunks c
         WHERE c.profile_id = s.profile_id AND c.content_hash = s.content_hash AND c.namespace_id = s.namespace_id
           AND c.embedding <> s.embedding) AS other_vectors,
       s.lex_length,
       (SELECT coalesce(sum(p.tf), 0) FROM kbctl.lexical_postings p
         WHERE p.namespace_id = s.namespace_id AND p.chunk_id = s.id) AS posted,
       (SELECT count(*) FROM kbctl.lexical_postings p
         WHERE p.namespace_id = s.namespace_id AND p.chunk_id = s.id AND p.dl <> s.lex_length) AS bad_lengths
FROM kbctl.chunks s
WHERE s.namespace_id = %s AND s.id = ANY(%s)
