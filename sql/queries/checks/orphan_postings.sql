-- Postings whose chunk is gone. Parameters: namespace id.
SELECT count(*)
FROM kbctl.lexical_postings p
WHERE p.namespace_id = %s
  AND NOT EXISTS (SELECT 1 FROM kbctl.chunks c WHERE c.namespace_id = p.namespace_id AND c.id = p.chunk_id)
