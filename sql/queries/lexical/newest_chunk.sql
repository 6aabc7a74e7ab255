-- The highest chunk id of a namespace (NULL when it has none). Parameters: namespace id.
SELECT max(id) FROM kbctl.chunks WHERE namespace_id = %s
