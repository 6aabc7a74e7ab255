-- A new generation of a namespace. Parameters: namespace id, profile id, dimension, storage, state.
INSERT INTO kbctl.generations (namespace_id, profile_id, dimension, storage, state, activated_at)
VALUES (%(ns)s, %(pid)s, %(dim)s, %(storage)s, %(state)s, CASE WHEN %(state)s = 'active' THEN now() END)
RETURNING id
