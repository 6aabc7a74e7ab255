-- The chunks a namespace's documents declare. Parameters: namespace id.
SELECT coalesce(sum(chunk_count), 0) FROM kbctl.documents WHERE namespace_id = %s
