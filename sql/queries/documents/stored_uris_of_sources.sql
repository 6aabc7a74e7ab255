-- The stored documents that came from these sources. Parameters: namespace id, source URIs.
SELECT uri, source_uri FROM kbctl.documents WHERE namespace_id = %s AND source_uri = ANY(%s)
