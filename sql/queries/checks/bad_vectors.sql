-- Chunks without a vector in the namespace's active generation (its key and CHECK tie a vector to
-- the generation's profile and dimension). Parameters: namespace id, generation id.
SELECT count(*)
FROM kbctl.chunks c
WHERE c.namespace_id = %s
  AND NOT EXISTS (SELECT FROM kbctl.vectors v
                  WHERE v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND v.generation_id = %s)
