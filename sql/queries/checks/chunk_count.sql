-- The chunks of a namespace. Parameters: namespace id.
SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s
