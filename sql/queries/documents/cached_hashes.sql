-- Which of these chunk hashes the embed cache holds a vector of under a profile: the hashes
-- documents/cached_vectors returns, without their vectors (a plan, or a check before the model
-- runs, needs only to know which exist). The same conditions: any generation of the tenant's
-- namespaces (row-level security keeps the others out), a halfvec vector only for a halfvec
-- generation, never a zero vector. Parameters: hashes, profile id, the storage of the generation
-- being written.
SELECT h
FROM unnest(%s::text[]) AS h
WHERE EXISTS (
  SELECT 1
  FROM kbctl.chunks c
  JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id
  WHERE c.content_hash = h AND v.profile_id = %s AND (v.storage = 'vector' OR %s = 'halfvec')
    AND vector_norm(coalesce(v.embedding, v.half::vector)) > 0
)
