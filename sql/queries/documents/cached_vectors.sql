-- Vectors already stored under a profile for these chunk hashes, in any generation of the tenant's
-- namespaces (row-level security keeps the others out). A halfvec vector serves only a halfvec
-- generation (it would not give a float32 one its precision back); a vector serves both.
-- Parameters: hashes, profile id, the storage of the generation being written.
SELECT DISTINCT ON (c.content_hash) c.content_hash, coalesce(v.embedding, v.half::vector)
FROM kbctl.chunks c
JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id
WHERE c.content_hash = ANY(%s) AND v.profile_id = %s AND (v.storage = 'vector' OR %s = 'halfvec')
ORDER BY c.content_hash, v.storage = 'vector' DESC
