-- A namespace's generations with their profiles, oldest first. Parameters: namespace id.
SELECT g.id, g.namespace_id, g.profile_id, p.name, p.fingerprint, p.model, g.dimension, p.distance, g.storage,
       g.state, g.created_at, g.activated_at
FROM kbctl.generations g
JOIN kbctl.profiles p ON p.id = g.profile_id
WHERE g.namespace_id = %s
ORDER BY g.id
