-- Documents without a chunk. Parameters: namespace id.
SELECT count(*)
FROM kbctl.documents d
WHERE d.namespace_id = %s
  AND NOT EXISTS (SELECT 1 FROM kbctl.chunks c WHERE c.namespace_id = d.namespace_id AND c.document_id = d.id)
