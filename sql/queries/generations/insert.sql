-- A new generation of a namespace; its id.
-- Parameters: namespace id, profile id, dimension, storage, state, state again (activated now if active).
INSERT INTO kbctl.generations (namespace_id, profile_id, dimension, storage, state, activated_at)
VALUES (%s, %s, %s, %s, %s, CASE WHEN %s = 'active' THEN now() END)
RETURNING id
