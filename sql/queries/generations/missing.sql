-- Chunks of a namespace without a vector in a generation, in id order after a given id, with what
-- their embedding text is made of (text, heading path, document title).
-- Parameters: namespace id, generation id, after this chunk id, how many.
SELECT c.id, c.content_hash, c.text, c.heading_path, d.title
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
WHERE c.namespace_id = %s
  AND NOT EXISTS (SELECT FROM kbctl.vectors v
                  WHERE v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND v.generation_id = %s)
  AND c.id > %s
ORDER BY c.id
LIMIT %s
