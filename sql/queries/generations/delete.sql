-- A generation and (by cascade) its vectors. Parameters: namespace id, generation id.
DELETE FROM kbctl.generations WHERE namespace_id = %s AND id = %s
