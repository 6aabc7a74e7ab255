-- A shadow generation that holds no vector (its build failed before writing one); its id, none
-- when it holds a vector or is no shadow. Parameters: namespace id, generation id.
DELETE FROM kbctl.generations g
WHERE g.namespace_id = %s AND g.id = %s AND g.state = 'shadow'
  AND NOT EXISTS (SELECT 1 FROM kbctl.vectors v WHERE v.namespace_id = g.namespace_id AND v.generation_id = g.id)
RETURNING g.id
