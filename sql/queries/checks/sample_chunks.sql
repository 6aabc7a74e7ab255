-- A stable pseudo-random sample of a namespace's chunks with their vectors in a generation.
-- Parameters: namespace id, generation id, sample size.
SELECT c.id, c.content_hash, coalesce(v.embedding, v.half::vector)
FROM kbctl.chunks c
JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND v.generation_id = %s
WHERE c.namespace_id = %s
ORDER BY md5(c.id::text)
LIMIT %s
