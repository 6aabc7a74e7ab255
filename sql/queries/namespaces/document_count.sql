-- The documents a namespace holds. Parameters: namespace id.
SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s
