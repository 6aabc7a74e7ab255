-- The chunks of the documents with these URIs. Parameters: namespace id, document URIs.
SELECT count(*)
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
WHERE d.namespace_id = %s AND d.uri = ANY(%s)
