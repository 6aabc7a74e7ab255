-- How many chunks of a namespace have no vector in a generation, and how many distinct texts they
-- hold. Parameters: namespace id, generation id.
SELECT count(*), count(DISTINCT c.content_hash)
FROM kbctl.chunks c
WHERE c.namespace_id = %s
  AND NOT EXISTS (SELECT FROM kbctl.vectors v
                  WHERE v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND v.generation_id = %s)
