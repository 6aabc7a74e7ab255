-- A namespace with the pin of its active generation's profile. Parameters: tenant, name.
SELECT n.id, n.tenant, n.name, g.profile_id, p.name, p.fingerprint, p.model, g.dimension, p.distance,
       n.description, g.id, g.storage, n.analyzer
FROM kbctl.namespaces n
JOIN kbctl.generations g ON g.namespace_id = n.id AND g.state = 'active'
JOIN kbctl.profiles p ON p.id = g.profile_id
WHERE n.tenant = %s AND n.name = %s
