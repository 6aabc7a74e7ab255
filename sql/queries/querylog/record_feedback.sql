-- A judgment of one returned document (the latest wins). Parameters: query id, namespace id, document id, useful.
INSERT INTO kbctl.query_feedback (query_id, namespace_id, document_id, useful) VALUES (%s, %s, %s, %s)
ON CONFLICT (query_id, namespace_id, document_id) DO UPDATE SET useful = EXCLUDED.useful, at = now()
