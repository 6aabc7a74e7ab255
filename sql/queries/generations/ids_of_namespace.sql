-- The generation ids of a namespace (their indexes go with it). Parameters: namespace id.
SELECT id FROM kbctl.generations WHERE namespace_id = %s
