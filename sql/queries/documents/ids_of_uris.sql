-- The ids of documents with these URIs and of their children. Parameters: namespace id, URIs, URIs.
SELECT id FROM kbctl.documents WHERE namespace_id = %s AND (uri = ANY(%s) OR parent_uri = ANY(%s))
