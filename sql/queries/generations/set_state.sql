-- Move a namespace's generations between states in one statement (the one-per-state rule is
-- checked at commit). Parameters: namespace id, then (generation id, new state) pairs as arrays.
UPDATE kbctl.generations g
SET state = x.state,
    activated_at = CASE WHEN x.state = 'active' THEN now() ELSE g.activated_at END,
    updated_at = now()
FROM unnest(%s::int[], %s::text[]) AS x(id, state)
WHERE g.namespace_id = %s AND g.id = x.id
