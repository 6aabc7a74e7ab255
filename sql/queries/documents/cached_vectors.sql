-- Vectors already stored under a profile for these chunk hashes, in any generation of the tenant's
-- namespaces (row-level security keeps the others out): one row per hash, read through the hash
-- index (a text repeated many times is not read once per copy). A halfvec vector serves only a
-- halfvec generation (it would not give a float32 one its precision back); a vector serves both.
-- A zero vector (no direction: damaged data, which kbctl never writes) is never handed on: one
-- namespace's damage must not spread to another through the cache.
-- Parameters: hashes, profile id, the storage of the generation being written.
SELECT h, x.vec
FROM unnest(%s::text[]) AS h
CROSS JOIN LATERAL (
  SELECT coalesce(v.embedding, v.half::vector) AS vec
  FROM kbctl.chunks c
  JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id
  WHERE c.content_hash = h AND v.profile_id = %s AND (v.storage = 'vector' OR %s = 'halfvec')
    AND vector_norm(coalesce(v.embedding, v.half::vector)) > 0
  LIMIT 1
) x
