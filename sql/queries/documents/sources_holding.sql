-- The stored sources (of those given) a chunk of which matches a pattern: those whose chunks a new
-- revision of the chunker may cut otherwise (kbctl.chunk.MOVED_SINCE, kbctl.ingest.producer).
-- Parameters: namespace id, source URIs, a regular expression.
SELECT DISTINCT d.source_uri
FROM kbctl.documents d
JOIN kbctl.chunks c ON c.namespace_id = d.namespace_id AND c.document_id = d.id
WHERE d.namespace_id = %s AND d.source_uri = ANY(%s) AND c.text ~ %s
