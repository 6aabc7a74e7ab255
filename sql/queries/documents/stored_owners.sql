-- The stored version and the source of documents. Parameters: namespace id, document URIs.
SELECT uri, content_hash, source_uri FROM kbctl.documents WHERE namespace_id = %s AND uri = ANY(%s)
