-- The id of a namespace's active generation (none while it has none). Parameters: namespace id.
SELECT id FROM kbctl.generations WHERE namespace_id = %s AND state = 'active'
