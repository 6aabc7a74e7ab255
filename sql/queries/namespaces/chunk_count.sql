-- The chunks a namespace holds. Parameters: namespace id.
SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s
