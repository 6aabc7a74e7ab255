-- The stored documents that came from one source. Parameters: namespace id, source URI.
SELECT uri, source_uri FROM kbctl.documents WHERE namespace_id = %s AND source_uri = %s
