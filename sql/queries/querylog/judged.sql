-- The judged queries over one namespace, with each judged document's URI.
-- Parameters: namespace id.
SELECT q.id, q.query, d.uri, f.useful
FROM kbctl.query_feedback f
JOIN kbctl.query_log q ON q.id = f.query_id
JOIN kbctl.documents d ON d.namespace_id = f.namespace_id AND d.id = f.document_id
WHERE f.namespace_id = %s
ORDER BY q.id, d.uri
