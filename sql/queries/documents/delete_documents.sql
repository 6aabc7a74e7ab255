-- Delete documents by id (their chunks and postings cascade). Parameters: namespace id, document ids.
DELETE FROM kbctl.documents WHERE namespace_id = %s AND id = ANY(%s)
