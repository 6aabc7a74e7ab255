-- Content hashes of stored documents. Parameters: namespace id, document URIs.
SELECT uri, content_hash FROM kbctl.documents WHERE namespace_id = %s AND uri = ANY(%s)
