-- The documents of a namespace. Parameters: namespace id.
SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s
