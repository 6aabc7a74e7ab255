-- The staged vectors moved into the table, each in its generation's storage, with its chunk's
-- document; a vector already there (dual writes and a re-embed met) or of a chunk deleted since it
-- was read is skipped. The chunk ids written are returned (`kbctl reembed` counts what it kept).
WITH s AS (DELETE FROM pg_temp.stage_vectors RETURNING *)
INSERT INTO kbctl.vectors (namespace_id, chunk_id, generation_id, document_id, profile_id, dimension, storage,
                           embedding, half)
SELECT s.namespace_id, s.chunk_id, s.generation_id, c.document_id, s.profile_id, s.dimension, s.storage,
       CASE WHEN s.storage = 'vector' THEN s.embedding END,
       CASE WHEN s.storage = 'halfvec' THEN s.embedding::halfvec END
FROM s
JOIN kbctl.chunks c ON c.namespace_id = s.namespace_id AND c.id = s.chunk_id
ON CONFLICT (namespace_id, chunk_id, generation_id) DO NOTHING
RETURNING chunk_id
