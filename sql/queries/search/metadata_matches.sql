-- Filters only: the matching chunks in a stable order (document URI, position), no score.
-- Template: f is the filters' condition on c.metadata.
-- Parameters: namespace ids, the filters' parameters, k.
SELECT c.namespace_id, c.id
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
WHERE c.namespace_id = ANY(%s) AND {f}
ORDER BY d.uri, c.position
LIMIT %s
